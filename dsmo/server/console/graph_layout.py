"""Where a definition's graph's nodes and edges go: a layered layout (grandalf's Sugiyama).

Grandalf's layout costs grow much faster than the graph (a 100-node graph with four edges a
node takes ~0.6 s, 200 nodes ~3.4 s, 500 nodes minutes), so a graph above `SUGIYAMA_MAX_NODES`
nodes or `SUGIYAMA_MAX_EDGES` edges is laid out plainly instead: one row per distance from the
start, edges as straight lines, linear in the graph's size. The drawing says so (``plain``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from grandalf.graphs import Edge as LayoutEdge
from grandalf.graphs import Graph, Vertex
from grandalf.layouts import SugiyamaLayout

from dsmo.workflows.definition.model import AgentDefinition

NODE_WIDTH, NODE_HEIGHT = 170.0, 46.0
MARGIN = 24.0
# Above either bound a graph is laid out by `plain_layout` (see the module's docstring).
SUGIYAMA_MAX_NODES, SUGIYAMA_MAX_EDGES = 80, 240
ROW_NODES = 8  # the plain layout wraps a row of more nodes than this


@dataclass
class Box:
    """A node placed on the drawing: its centre and size."""

    node: str
    action_type: str
    x: float = 0.0
    y: float = 0.0
    w: float = NODE_WIDTH
    h: float = NODE_HEIGHT
    xy: tuple[float, float] = (0.0, 0.0)  # grandalf writes the centre here


@dataclass
class Arrow:
    """One edge: a `next` or a transition, routed as a polyline."""

    source: str
    target: str
    label: str
    points: list[tuple[float, float]] = field(default_factory=list)

    def setpath(self, points: list[tuple[float, float]]) -> None:  # grandalf's routing callback
        self.points = [(float(x), float(y)) for x, y in points]


@dataclass
class Drawing:
    """Placed nodes and routed edges; ``plain`` when drawn by `plain_layout` (a large graph)."""

    boxes: dict[str, Box]
    arrows: list[Arrow]
    width: float
    height: float
    plain: bool = False


def edges(definition: AgentDefinition) -> list[tuple[str, str, str]]:
    """Every edge as (source, target, label): `next`, or each transition's condition (`default`)."""
    found = []
    for node_id, node in definition.nodes.items():
        if node.next is not None:
            found.append((node_id, node.next, ""))
        for transition in node.transitions:
            found.append((node_id, transition.to, transition.when or "default"))
    return found


def layout(definition: AgentDefinition) -> Drawing:
    """Place every node in layers from the start (cycles are broken for layering, still drawn)."""
    kinds = {node_id: node.action_type for node_id, node in definition.nodes.items()}
    return layout_graph(kinds, edges(definition), definition.start)


def layout_graph(kinds: Mapping[str, str], edge_list: list[tuple[str, str, str]], start: str) -> Drawing:
    """Place nodes (id -> action type) and edges (source, target, label) in layers from ``start``.

    Graphs above `SUGIYAMA_MAX_NODES` nodes or `SUGIYAMA_MAX_EDGES` edges get `plain_layout`.
    """
    if len(kinds) > SUGIYAMA_MAX_NODES or len(edge_list) > SUGIYAMA_MAX_EDGES:
        return plain_layout(kinds, edge_list, start)
    boxes = {node_id: Box(node_id, kind) for node_id, kind in kinds.items()}
    vertices = {node_id: Vertex(node_id) for node_id in boxes}
    for node_id, vertex in vertices.items():
        vertex.view = boxes[node_id]
    arrows: list[Arrow] = []
    layout_edges = []
    for source, target, label in edge_list:
        arrow = Arrow(source, target, label)
        arrows.append(arrow)
        if source == target:
            continue  # a self-loop has no layer to span; it is drawn beside its node
        edge = LayoutEdge(vertices[source], vertices[target])
        edge.view = arrow
        layout_edges.append(edge)
    graph = Graph(list(vertices.values()), layout_edges)
    offset = 0.0
    for component in graph.C:  # the fail-safe node may stand apart from the rest
        sugiyama = SugiyamaLayout(component)
        roots = [vertex for vertex in component.sV if vertex.data == start] or None
        sugiyama.init_all(roots=roots)
        sugiyama.xspace, sugiyama.yspace = 30, 50
        sugiyama.draw()
        placed = [vertex.view for vertex in component.sV]
        left = min(box.xy[0] - box.w / 2 for box in placed)
        for box in placed:
            box.x, box.y = box.xy[0] - left + offset, box.xy[1]
        for edge in component.sE:
            edge.view.points = [(x - left + offset, y) for x, y in edge.view.points]
        offset = max(box.x + box.w / 2 for box in placed) + 2 * MARGIN
    top = min(box.y - box.h / 2 for box in boxes.values())
    for box in boxes.values():
        box.x, box.y = box.x + MARGIN, box.y - top + MARGIN
    for arrow in arrows:
        arrow.points = [(x + MARGIN, y - top + MARGIN) for x, y in arrow.points]
        if not arrow.points or arrow.source == arrow.target:
            arrow.points = _straight(boxes[arrow.source], boxes[arrow.target])
        else:  # grandalf routes centre to centre: end the line on each box's border, arrowhead visible
            arrow.points[0] = _border(boxes[arrow.source], arrow.points[1])
            arrow.points[-1] = _border(boxes[arrow.target], arrow.points[-2])
    width = max(box.x + box.w / 2 for box in boxes.values()) + MARGIN
    height = max(box.y + box.h / 2 for box in boxes.values()) + MARGIN
    return Drawing(boxes, arrows, width, height)


def plain_layout(kinds: Mapping[str, str], edge_list: list[tuple[str, str, str]], start: str) -> Drawing:
    """Rows by distance from ``start`` (breadth first), wrapped every `ROW_NODES`; straight edges.

    Linear in nodes and edges, for graphs too large for the layered layout. Nodes the start
    cannot reach come last, in one more row.
    """
    following: dict[str, list[str]] = {node_id: [] for node_id in kinds}
    for source, target, _ in edge_list:
        following[source].append(target)
    depth = {start: 0} if start in kinds else {}
    queue = deque(depth)
    while queue:
        node_id = queue.popleft()
        for target in following[node_id]:
            if target not in depth:
                depth[target] = depth[node_id] + 1
                queue.append(target)
    unreached = max(depth.values(), default=-1) + 1
    rows: dict[int, list[str]] = {}
    for node_id in kinds:
        rows.setdefault(depth.get(node_id, unreached), []).append(node_id)
    boxes: dict[str, Box] = {}
    line = 0
    for level in sorted(rows):
        members = rows[level]
        for first in range(0, len(members), ROW_NODES):
            for column, node_id in enumerate(members[first : first + ROW_NODES]):
                x = MARGIN + NODE_WIDTH / 2 + column * (NODE_WIDTH + 30)
                y = MARGIN + NODE_HEIGHT / 2 + line * (NODE_HEIGHT + 50)
                boxes[node_id] = Box(node_id, kinds[node_id], x=x, y=y)
            line += 1
    arrows = []
    for source, target, label in edge_list:
        arrow = Arrow(source, target, label)
        if source == target:
            arrow.points = _straight(boxes[source], boxes[target])
        else:
            there, back = boxes[target], boxes[source]
            arrow.points = [_border(back, (there.x, there.y)), _border(there, (back.x, back.y))]
        arrows.append(arrow)
    width = max((box.x + box.w / 2 for box in boxes.values()), default=0.0) + MARGIN
    height = max((box.y + box.h / 2 for box in boxes.values()), default=0.0) + MARGIN
    return Drawing(boxes, arrows, width, height, plain=True)


def _border(box: Box, toward: tuple[float, float]) -> tuple[float, float]:
    """Where the line from ``box``'s centre to ``toward`` leaves the box."""
    dx, dy = toward[0] - box.x, toward[1] - box.y
    if dx == 0 and dy == 0:
        return box.x, box.y
    scale = min(box.w / 2 / abs(dx) if dx else float("inf"), box.h / 2 / abs(dy) if dy else float("inf"))
    return box.x + dx * min(scale, 1.0), box.y + dy * min(scale, 1.0)


def _straight(source: Box, target: Box) -> list[tuple[float, float]]:
    if source is target:  # a loop on itself: out of the right side and back in
        right, y = source.x + source.w / 2, source.y
        return [(right, y - 8), (right + 24, y - 8), (right + 24, y + 8), (right, y + 8)]
    return [(source.x, source.y + source.h / 2), (target.x, target.y - target.h / 2)]
