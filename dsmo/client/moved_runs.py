"""A moved run's record read against the version it is on now: which nodes a fork or rewind may
name, and its record before each move translated through that move's node map.

A run moved with `DsmoClient.migrate` keeps the config snapshot it started with (a replay starts
there and moves where it moved), so the nodes it can be forked from or sent back to are judged
here by the version it is on now; a node of an earlier version the move renamed or dropped is
refused naming the versions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsmo.client import definitions_client
from dsmo.client.core import ClientCore
from dsmo.client.record_lines import stage_visits
from dsmo.workflows.contracts.migration_io import MigrationRequest
from dsmo.workflows.contracts.replay_plan import RecordedMove, ReplayPlan
from dsmo.workflows.contracts.run_records import AuditEvent
from dsmo.workflows.definition.model import AgentDefinition


def version_now(first: AgentDefinition, moves: Sequence[RecordedMove]) -> AgentDefinition:
    """The definition the run follows now: its last move's target, or the one it started on."""
    return moves[-1].request.definition if moves else first


def record_definition(first: AgentDefinition, moves: Sequence[RecordedMove]) -> AgentDefinition:
    """One definition holding every node the run's record can name (for what kind of stage each is).

    A name two versions share takes the later version's node, as the record after the move does.
    """
    if not moves:
        return first
    nodes: dict[str, Any] = dict(first.nodes)
    for move in moves:
        nodes.update(move.request.definition.nodes)
    return first.model_copy(update={"nodes": nodes})


def renamed(node: str, maps: Sequence[dict[str, str]]) -> str:
    """What ``node`` is called after the moves whose node maps are ``maps`` (in order)."""
    for node_map in maps:
        node = node_map.get(node, node)
    return node


def node_problem(option: str, node: str, first: AgentDefinition, moves: Sequence[RecordedMove]) -> str | None:
    """Why ``node`` cannot be forked from or gone back to, judged by the version the run is on now."""
    now = version_now(first, moves)
    if node in now.nodes:
        return None
    earlier = [first, *(move.request.definition for move in moves[:-1])]
    had = [definition.version for definition in earlier if node in definition.nodes]
    if not had:
        return f"{option}: {node!r} is not a node of {now.agent} {now.version} ({', '.join(now.nodes)})"
    called = renamed(node, [move.request.node_map for move in moves])
    now_called = (
        f", which calls it {called!r}" if called != node and called in now.nodes else ", which has no such node"
    )
    return (
        f"{option}: {node!r} is a node of {now.agent} {' and '.join(had)} only; the run moved to "
        f"{now.version}{now_called} (name a node of {now.version})"
    )


def on_version_now(plan: ReplayPlan, events: Sequence[AuditEvent]) -> ReplayPlan:
    """``plan`` for re-executing the record on the version the run is on now (a rewind of a moved
    run): each record before a move named as that move's node map names it, no moves left to make,
    and the values the moves set applied where the run goes live."""
    moves = plan.moves
    if not moves:
        return plan
    maps = [move.request.node_map for move in moves]
    resume_moves: list[int] = []  # per recorded resume (and saga action): how many moves came before it
    action_moves: list[int] = []
    moves_by_seq: dict[int, int] = {}
    seen = 0
    for event in events:
        moves_by_seq[event.seq] = seen
        if event.type == "RUN_MIGRATED":
            seen += 1
        elif event.type == "RUN_RESUMED":
            resume_moves.append(seen)
        elif event.type in ("STAGE_SUCCEEDED", "STAGE_FAILED") and "action" in event.data:
            action_moves.append(seen)

    def after(node: str, before: int) -> str:
        return renamed(node, maps[before:])

    resumes = [
        resume.model_copy(
            update={"node": after(resume.node, resume_moves[index] if index < len(resume_moves) else seen)}
        )
        for index, resume in enumerate(plan.resumes)
    ]
    actions = [
        action.model_copy(update={"node": after(action.node, action_moves[index])})
        for index, action in enumerate(plan.actions)
    ]
    reuse: dict[str, str] = {}
    for key, event in stage_visits(events):
        if key in plan.reuse:
            node, dot, visit = key.rpartition(".v")
            if not (dot and visit.isdigit()):  # a first visit: the key is the node
                node, dot, visit = key, "", ""
            reuse[after(node, moves_by_seq.get(event.seq, seen)) + dot + visit] = plan.reuse[key]
    set_by_moves: dict[str, Any] = {}
    for move in moves:
        set_by_moves.update(move.request.set)
    return plan.model_copy(
        update={
            "resumes": resumes,
            "actions": actions,
            "reuse": reuse,
            "moves": [],
            "corrections": {**set_by_moves, **plan.corrections},
        }
    )


async def recorded_moves(core: ClientCore, agent: str, events: list[AuditEvent]) -> list[RecordedMove]:
    """The original's moves to other versions, for the replay to make at the same points.

    Each counts the resumes taken since the previous move: a replay's next generation starts
    its cursor in the record again from there.
    """
    moves: list[RecordedMove] = []
    resumes = 0
    for event in events:
        if event.type == "RUN_RESUMED":
            resumes += 1
        elif event.type == "RUN_MIGRATED":
            data = event.data
            target = await definitions_client.definition(core, agent, str(data["toWorkflowVersion"]))
            request = MigrationRequest(
                definition=target,
                node_map=dict(data.get("nodeMap") or {}),
                leave_wait=bool(data.get("leftWait")),
                restart_timers=bool(data.get("restartTimers")),
                set=dict(data.get("set") or {}),
                requested_by="replay",
                reason=f"as the original moved (#{event.seq})",
            )
            moves.append(
                RecordedMove(
                    node=data.get("fromNode"),
                    waiting=bool(data.get("waiting")),
                    resumes_before=resumes,
                    request=request,
                )
            )
            resumes = 0
    return moves
