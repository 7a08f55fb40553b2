"""What changed between two versions of a definition, drawn on one graph.

Both versions' nodes and edges are laid out together: added ones are marked ``added``, removed
ones ``removed`` (still drawn, dashed, so the reader sees what went away), nodes whose settings
changed ``changed``.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsmo.server.console.graph import Arrow, Drawing, draw, edges, layout_graph
from dsmo.workflows.definition.model import AgentDefinition

EdgeKey = tuple[str, str, str]  # source, target, label (the condition, or "" for next)


@dataclass(frozen=True)
class GraphDiff:
    """Nodes and edges added, removed or changed from ``old`` to ``new``."""

    added_nodes: list[str]
    removed_nodes: list[str]
    changed_nodes: list[str]
    added_edges: list[EdgeKey]
    removed_edges: list[EdgeKey]

    @property
    def empty(self) -> bool:
        return not (
            self.added_nodes or self.removed_nodes or self.changed_nodes or self.added_edges or self.removed_edges
        )


def diff(old: AgentDefinition, new: AgentDefinition) -> GraphDiff:
    """Compare two definitions node by node (settings included) and edge by edge."""
    before, after = old.nodes, new.nodes

    def settings(definition: AgentDefinition, node_id: str) -> object:
        # What the node does, without its way out (edges are compared on their own).
        dumped = definition.nodes[node_id].model_dump(mode="json", by_alias=True, exclude_none=True)
        return {key: value for key, value in dumped.items() if key not in ("next", "transitions")}

    old_edges, new_edges = set(edges(old)), set(edges(new))
    return GraphDiff(
        added_nodes=sorted(set(after) - set(before)),
        removed_nodes=sorted(set(before) - set(after)),
        changed_nodes=sorted(node for node in set(before) & set(after) if settings(old, node) != settings(new, node)),
        added_edges=sorted(new_edges - old_edges),
        removed_edges=sorted(old_edges - new_edges),
    )


def diff_layout(old: AgentDefinition, new: AgentDefinition) -> Drawing:
    """Both versions' nodes and edges laid out together."""
    kinds = {node_id: node.action_type for node_id, node in old.nodes.items()}
    kinds.update({node_id: node.action_type for node_id, node in new.nodes.items()})
    every_edge = sorted(set(edges(old)) | set(edges(new)))
    return layout_graph(kinds, every_edge, new.start)


def diff_svg(
    old: AgentDefinition, new: AgentDefinition, *, changes: GraphDiff | None = None, drawing: Drawing | None = None
) -> str:
    """Both versions on one drawing, each change marked (see the module's docstring).

    ``changes`` and ``drawing`` are `diff` and `diff_layout` of the two, when the caller has them.
    """
    changes = changes or diff(old, new)
    marks = (
        {node: "added" for node in changes.added_nodes}
        | {node: "removed" for node in changes.removed_nodes}
        | {node: "changed" for node in changes.changed_nodes}
    )
    added, removed = set(changes.added_edges), set(changes.removed_edges)

    def edge_marks(arrow: Arrow) -> list[str]:
        key = (arrow.source, arrow.target, arrow.label)
        return ["added"] if key in added else ["removed"] if key in removed else []

    return draw(
        drawing or diff_layout(old, new),
        title=f"{new.agent}: {old.workflow_version} -> {new.workflow_version}",
        node_marks=lambda node: [marks[node]] if node in marks else [],
        edge_marks=edge_marks,
    )
