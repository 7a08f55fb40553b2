"""Which waits still lie ahead of a run, from its definition's graph alone.

An event is worth keeping only if one of these waits could take it (intake.py).
"""

from __future__ import annotations

from typing import Any

from dsmo.workflows.definition.model import AgentDefinition, successors
from dsmo.workflows.definition.node_types import ExternalWaitNode, RequestDocumentNode
from dsmo.workflows.events.resume_events import EVENT_KINDS, ResumeEvent


def takes_kind(node: Any, event: ResumeEvent) -> bool:
    """Whether a wait node takes events like ``event`` at all (its match is decided when it waits)."""
    if node.parameters.kind != EVENT_KINDS[event.type].waiting_for:
        return False
    return not isinstance(node, RequestDocumentNode) or event.data["document"] in node.parameters.documents


def waits_ahead(
    definition: AgentDefinition, node_id: str | None, *, include_current: bool, fail_safe: bool
) -> list[ExternalWaitNode]:
    """The external waits a run at ``node_id`` may still enter, from the definition's graph.

    ``include_current`` when the run has not begun (or finished) waiting at ``node_id``;
    ``fail_safe`` while a contract violation may still send the run to the fail-safe node.
    """
    nodes = definition.nodes
    if node_id is None:
        pending = [definition.start]
    else:
        pending = [node_id] if include_current else list(successors(nodes[node_id]))
    if fail_safe and definition.fail_safe is not None:
        pending.append(definition.fail_safe)
    seen: set[str] = set()
    found: list[ExternalWaitNode] = []
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        node = nodes[current]
        if isinstance(node, ExternalWaitNode):
            found.append(node)
        pending.extend(successors(node))
    return found
