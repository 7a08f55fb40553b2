"""Whether a run may move to another version of its agent's definition, decided before anything moves.

A run moves from its node in one version to the mapped node of another: by default the node with
the same id, else the one a node map names. These checks read only the two definitions and what
the run is doing now, so the update that asks for a move can refuse it in its validator, with
one line naming the reason, before anything is written to the run's history.

The templates and conditions ahead of the mapped node must also find every variable they read
(`needed_variables.py`): the run's own, the ones a caller supplies, or one a node ahead sets.
(Every node of an admitted definition reaches an end, so the mapped node does too.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.definition.needed_variables import needed_variables
from dsmo.workflows.definition.node_types import DelayNode, TriggerAgentNode
from dsmo.workflows.definition.waits_ahead import takes_kind, waits_ahead
from dsmo.workflows.events.resume_events import ResumeEvent

# Wait kinds a run leaves only at its next node boundary: a child run is awaited through a
# handle that cannot cross a continue-as-new.
MOVES_AT_BOUNDARY = frozenset({"agent"})


class MigrationRefused(DsmoError):
    """A run cannot move to the version asked for; the message says why, in one line.

    ``already`` marks the one refusal that is not a problem: the run follows the target already.
    """

    code = "migration_refused"

    def __init__(self, message: str, *, already: bool = False) -> None:
        super().__init__(message)
        self.already = already


@dataclass(frozen=True)
class RunPosition:
    """What a run is doing when a move is asked for.

    Attributes:
        node: The node the run is at, or None before its first node.
        waiting_for: The kind of wait the run is in (``response``, ``document``, ``agent``,
            ``delay``, ...), or None between waits.
        kept: The events kept in the run's inbox for a wait ahead.
        variables: The run's variables, with any corrections the move brings; None skips the
            check of what the nodes ahead need.
    """

    node: str | None
    waiting_for: str | None = None
    kept: Sequence[ResumeEvent] = ()
    variables: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class MigrationPlan:
    """What a move will do, once every check passed.

    Attributes:
        node: The node the run continues at in the target version (None: its start).
        node_map: The map used, every entry checked against both versions.
        no_op: The run is already on the target version; nothing moves.
        expiring: Ids of kept events no wait ahead in the target version takes: they expire
            with the move (recorded in the trail), as an event kept past its TTL does.
    """

    node: str | None
    node_map: Mapping[str, str] = field(default_factory=dict)
    no_op: bool = False
    expiring: tuple[str, ...] = ()


def plan_migration(
    source: AgentDefinition,
    target: AgentDefinition,
    position: RunPosition,
    node_map: Mapping[str, str] | None = None,
    *,
    leave_wait: bool = False,
) -> MigrationPlan:
    """Check a move of a run from ``source`` to ``target`` and say what it will do.

    Args:
        source: The version the run is on.
        target: The version to move it to (published, of the same agent).
        position: What the run is doing now.
        node_map: Source node ids to target node ids, for nodes whose id changed.
        leave_wait: Move a waiting run to a node that is not the same kind of wait (the wait
            is left, and the run goes on from the mapped node).

    Returns:
        The plan: the node to continue at, the map, and the kept events that will expire.

    Raises:
        MigrationRefused: The move cannot be made; the message names the reason.
    """
    node_map = dict(node_map or {})
    if target.agent != source.agent:
        raise MigrationRefused(f"target: agent {target.agent!r} is not the run's agent {source.agent!r}")
    for old, new in node_map.items():
        if old not in source.nodes:
            raise MigrationRefused(f"map {old}:{new}: version {source.version} has no node {old!r}")
        if new not in target.nodes:
            raise MigrationRefused(f"map {old}:{new}: version {target.version} has no node {new!r}")
    if target.workflow_version == source.workflow_version:
        return MigrationPlan(node=position.node, node_map=node_map, no_op=True)
    if position.node is None:
        _check_ahead(target, target.start, position)
        return MigrationPlan(node=None, node_map=node_map, expiring=_expiring(target, None, position.kept))
    mapped = node_map.get(position.node, position.node)
    if mapped not in target.nodes:
        raise MigrationRefused(
            f"node: {position.node!r} has no counterpart in version {target.version} "
            f"(map it: --map {position.node}:<node>)"
        )
    if position.waiting_for is not None and not leave_wait:
        takes = wait_kind(target.nodes[mapped])
        if takes != position.waiting_for:
            what = f"waits for {takes}" if takes else f"is a {target.nodes[mapped].action_type} node"
            raise MigrationRefused(
                f"node: the run waits for {position.waiting_for} at {position.node!r}; "
                f"{mapped!r} in version {target.version} {what} (map it to a {position.waiting_for} wait, "
                "or leave the wait)"
            )
    _check_ahead(target, mapped, position)
    return MigrationPlan(node=mapped, node_map=node_map, expiring=_expiring(target, mapped, position.kept))


def _check_ahead(target: AgentDefinition, node: str, position: RunPosition) -> None:
    if position.variables is None:
        return
    missing = needed_variables(target, node, position.variables)
    if missing:
        first = missing[0]
        more = f" (and {', '.join(missing[1:])})" if len(missing) > 1 else ""
        raise MigrationRefused(
            f"variables: version {target.version} reads {first!r} from {node!r} on, which the run does not "
            f"have{more} (give it: --set {first}=<value>)"
        )


def variables_after_move(
    variables: Mapping[str, Any], node_map: Mapping[str, str], corrections: Mapping[str, Any]
) -> dict[str, Any]:
    """A run's variables as the target version sees them.

    Each renamed stage's output is also found under its new id (the target's templates name
    it so), and ``corrections`` (a move's ``set``) are applied last.
    """
    moved = dict(variables)
    stages = moved.get("stages")
    if isinstance(stages, dict) and node_map:
        stages = dict(stages)
        for old, new in node_map.items():
            if old in stages and new not in stages:
                stages[new] = stages[old]
        moved["stages"] = stages
    moved.update(corrections)
    return moved


def wait_kind(node: Any) -> str | None:
    """The kind of wait a node is, or None for a node that does not wait."""
    if isinstance(node, DelayNode):
        return "delay"
    if isinstance(node, TriggerAgentNode):
        return "agent"
    parameters = getattr(node, "parameters", None)
    kind = getattr(type(parameters), "kind", None)
    return kind if isinstance(kind, str) else None


def _expiring(target: AgentDefinition, node: str | None, kept: Sequence[ResumeEvent]) -> tuple[str, ...]:
    ahead = waits_ahead(target, node, include_current=True, fail_safe=True)
    return tuple(event.event_id for event in kept if not any(takes_kind(wait, event) for wait in ahead))
