"""Definition pages' graphs: drawn off the event loop, once per version (or pair), and kept.

A layout is CPU work (see `graph`): run on the event loop it would stall every other request the
server is answering, so it runs on a worker thread, at most `DRAWING_AT_ONCE` at a time. A
published version never changes (its workflow version is a hash of its content), so each
drawing is made once and kept, up to `KEPT_DRAWINGS`; requests for a drawing being made wait for
that one instead of starting another.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from dsmo.server.console import graph, graph_diff
from dsmo.workflows.definition.model import AgentDefinition

KEPT_DRAWINGS = 128
DRAWING_AT_ONCE = 2


@dataclass(frozen=True)
class DrawnGraph:
    """A definition's SVG (or two versions' diff, with the list of changes).

    Attributes:
        svg: The drawing.
        plain: Drawn with the plain layout (a graph too large for the layered one).
        changes: What changed from the older version, when two were compared.
    """

    svg: str
    plain: bool
    changes: graph_diff.GraphDiff | None = None


def draw(shown: AgentDefinition, older: AgentDefinition | None) -> DrawnGraph:
    """Lay out and draw ``shown``, or its changes from ``older`` (CPU work: call off the loop)."""
    if older is None:
        drawing = graph.layout(shown)
        return DrawnGraph(graph.svg(shown, drawing=drawing), drawing.plain)
    changes, drawing = graph_diff.diff(older, shown), graph_diff.diff_layout(older, shown)
    return DrawnGraph(graph_diff.diff_svg(older, shown, changes=changes, drawing=drawing), drawing.plain, changes)


class DefinitionGraphs:
    """Drawings by workflow version (or old and new version), made on a thread and kept (bounded).

    Args:
        size: How many drawings stay in memory.
    """

    def __init__(self, size: int = KEPT_DRAWINGS) -> None:
        self.size = size
        self._kept: OrderedDict[tuple[str, str], asyncio.Future[DrawnGraph]] = OrderedDict()
        self._slots = asyncio.Semaphore(DRAWING_AT_ONCE)

    async def get(self, shown: AgentDefinition, older: AgentDefinition | None = None) -> DrawnGraph:
        """The drawing of ``shown`` (compared with ``older`` when given)."""
        key = (shown.workflow_version, older.workflow_version if older else "")
        found = self._kept.get(key)
        if found is None:
            found = asyncio.ensure_future(self._draw(shown, older))
            self._kept[key] = found
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(key)
        try:
            return await asyncio.shield(found)  # one caller leaving does not cancel the others' drawing
        except Exception:
            if self._kept.get(key) is found:
                del self._kept[key]  # drawn again next time, not failed for ever
            raise

    async def _draw(self, shown: AgentDefinition, older: AgentDefinition | None) -> DrawnGraph:
        async with self._slots:
            return await asyncio.to_thread(draw, shown, older)
