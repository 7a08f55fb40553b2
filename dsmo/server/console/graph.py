"""A definition's graph, drawn as SVG or Mermaid text (laid out by `graph_layout`).

The SVG marks the path a run took (visited nodes, taken edges) and the node it is at, for run
pages and `dsmo definitions graph`. Every label is escaped: node ids are restricted by the
definition format, but conditions and descriptions are free text.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Callable
from typing import Any

from dsmo.server.console.graph_layout import Arrow, Box, Drawing, edges, layout, layout_graph, plain_layout
from dsmo.workflows.definition.model import AgentDefinition

__all__ = ["Arrow", "Box", "Drawing", "draw", "edges", "layout", "layout_graph", "mermaid", "plain_layout", "svg"]

LABEL_CHARS = 40  # a condition longer than this is shortened on its edge (whole in its tooltip)
STYLE = (
    "<style>"
    ".node rect{fill:#fff;stroke:#8a8f98;stroke-width:1.2}"
    ".visited rect{fill:#e6f0ff;stroke:#2f6fde}"
    ".current rect{fill:#fff4d6;stroke:#c77d00;stroke-width:3}"
    ".start rect{stroke-dasharray:4 2}"
    ".added rect{fill:#e5f6e8;stroke:#2e8540;stroke-width:2}"
    ".removed rect{fill:#fdecea;stroke:#c62828;stroke-dasharray:5 3}"
    ".changed rect{fill:#fff4d6;stroke:#c77d00;stroke-width:2}"
    ".node text{font:12px sans-serif;fill:#1d1f23;text-anchor:middle}"
    ".node .kind{fill:#5c6370;font-size:10px}"
    ".edge{fill:none;stroke:#9aa0a8;stroke-width:1.2;marker-end:url(#arrow)}"
    ".taken{stroke:#2f6fde;stroke-width:2.6;marker-end:url(#arrow-taken)}"
    ".edge.added{stroke:#2e8540;stroke-width:2}"
    ".edge.removed{stroke:#c62828;stroke-dasharray:5 3}"
    ".edge-label{font:10px sans-serif;fill:#5c6370}"
    "</style>"
)
MARKERS = (
    "<defs>"
    + "".join(
        f'<marker id="{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="{colour}"/></marker>'
        for name, colour in (("arrow", "#9aa0a8"), ("arrow-taken", "#2f6fde"))
    )
    + "</defs>"
)


def taken_edges(path: list[str]) -> set[tuple[str, str]]:
    """The edges a run went along: each consecutive pair of its path."""
    return set(itertools.pairwise(path))


def svg(
    definition: AgentDefinition,
    *,
    path: list[str] | None = None,
    current: str | None = None,
    drawing: Drawing | None = None,
) -> str:
    """The graph as a standalone SVG; ``path`` (nodes in order) and ``current`` are highlighted.

    Classes for styling: ``node``, ``visited``, ``current``, ``start``, ``edge``, ``taken``.
    ``drawing`` is the definition's `layout`, when the caller kept it (a large one costs CPU time).
    """
    visited, taken = set(path or ()), taken_edges(list(path or ()))

    def node_marks(node_id: str) -> list[str]:
        marks = ["visited"] if node_id in visited else []
        marks += ["current"] if node_id == current else []
        return marks + (["start"] if node_id == definition.start else [])

    return draw(
        drawing or layout(definition),
        title=f"{definition.agent}: the definition's graph",
        node_marks=node_marks,
        edge_marks=lambda arrow: ["taken"] if (arrow.source, arrow.target) in taken else [],
    )


def draw(
    drawing: Drawing,
    *,
    title: str,
    node_marks: Callable[[str], list[str]],
    edge_marks: Callable[[Arrow], list[str]],
) -> str:
    """A laid-out graph as SVG, each node and edge carrying the classes its mark function gives."""
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="dsmo-graph" role="img" '
        f'viewBox="0 0 {drawing.width:.0f} {drawing.height:.0f}" width="{drawing.width:.0f}" '
        f'height="{drawing.height:.0f}"><title>{_text(title)}</title>',
        STYLE,
        MARKERS,
    ]
    for arrow in drawing.arrows:
        classes = " ".join(["edge", *edge_marks(arrow)])
        points = " ".join(f"{x:.1f},{y:.1f}" for x, y in arrow.points)
        parts.append(
            f'<polyline class="{classes}" data-source="{_text(arrow.source)}" '
            f'data-target="{_text(arrow.target)}" points="{points}"/>'
        )
        if arrow.label:
            (x1, y1), (x2, y2) = arrow.points[0], arrow.points[-1]
            parts.append(
                f'<text class="edge-label" x="{(x1 + x2) / 2 + 4:.1f}" y="{(y1 + y2) / 2:.1f}">'
                f"<title>{_text(arrow.label)}</title>{_text(_short(arrow.label))}</text>"
            )
    for node_id, box in drawing.boxes.items():
        classes = " ".join(["node", *node_marks(node_id)])
        left, top = box.x - box.w / 2, box.y - box.h / 2
        parts.append(
            f'<g class="{classes}" data-node="{_text(node_id)}">'
            f'<rect x="{left:.1f}" y="{top:.1f}" width="{box.w:.0f}" height="{box.h:.0f}" rx="6"/>'
            f'<text x="{box.x:.1f}" y="{box.y - 3:.1f}">{_text(node_id)}</text>'
            f'<text class="kind" x="{box.x:.1f}" y="{box.y + 12:.1f}">{_text(box.action_type)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def mermaid(definition: AgentDefinition, *, path: list[str] | None = None) -> str:
    """The graph as a Mermaid flowchart (renders in GitHub, GitLab and most docs sites)."""
    lines = ["flowchart TD"]
    for node_id, node in definition.nodes.items():
        lines.append(f'    {node_id}["{_mermaid_text(node_id)}<br/><small>{node.action_type}</small>"]')
    for source, target, label in edges(definition):
        arrow = f' -- "{_mermaid_text(_short(label))}" --> ' if label else " --> "
        lines.append(f"    {source}{arrow}{target}")
    if path:
        lines.append("    classDef visited fill:#e6f0ff,stroke:#2f6fde")
        lines.append(f"    class {','.join(dict.fromkeys(path))} visited")
    return "\n".join(lines) + "\n"


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= LABEL_CHARS else flat[: LABEL_CHARS - 1] + "…"


def _text(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _mermaid_text(text: str) -> str:
    # Mermaid's entity codes: a quote would end the label, angle brackets would open HTML.
    return text.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
