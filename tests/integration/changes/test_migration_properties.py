"""A property of moving runs, on the real stack: a move is refused before any write, or the run ends
on the target version.

Hypothesis draws two versions of a chain of nodes (waits of every kind and messages, node ids
from a small alphabet so that some match and some do not, a message that may read a variable
the run lacks), how far the run gets on version 1, and the move: a node map, whether to leave
a wait of another kind, whether to supply the variable. Whatever is drawn, either the move is
refused with a reason and the run's history and trail are as they were, or the run, answered
wait by wait, completes at the target version's end.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsmo.client.client_errors import MigrationNotAccepted
from dsmo.client.dsmo_client import DsmoClient
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import StatusView
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness
from tests.migration_versions import history_length
from tests.polling import until_value

pytestmark = pytest.mark.asyncio

IDS = ["a", "b", "c", "d", "e"]
WAIT = {"timeout": "1h", "onTimeout": "fail"}
NODES: dict[str, dict[str, Any]] = {
    "response": {"actionType": "wait_for_response", "parameters": WAIT},
    "event": {"actionType": "wait_for_event", "parameters": {"event": "meeting", **WAIT}},
    "document": {"actionType": "request_document", "parameters": {"documents": ["id_card"], **WAIT}},
    "signature": {"actionType": "request_signature", "parameters": {"document": "s3://contract", **WAIT}},
    "message": {"actionType": "send_message", "parameters": {"message": "hello"}},
    "needs": {"actionType": "send_message", "parameters": {"message": "for {{ priority }}"}},
}
ANSWERS: dict[str, tuple[str, dict[str, Any]]] = {
    "response": ("MESSAGE_RECEIVED", {"text": "yes"}),
    "event": ("EVENT_COMPLETED", {"result": "done"}),
    "document": ("DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://docs/id"}),
    "signature": ("SIGNATURE_COMPLETED", {"signedDocumentUrl": "s3://signed"}),
}


@dataclass(frozen=True)
class Case:
    v1: list[tuple[str, str]]  # (node id, kind) in order
    v2: list[tuple[str, str]]
    answered: int  # waits answered on version 1 before the move
    node_map: dict[str, str]
    leave_wait: bool
    supply: bool


def chain(kinds: list[str]) -> st.SearchStrategy[list[tuple[str, str]]]:
    return st.permutations(IDS).map(lambda ids: list(zip(ids, kinds, strict=False)))


@st.composite
def cases(draw: st.DrawFn) -> Case:
    waits = ["response", "event", "document", "signature"]
    v1_kinds = draw(st.lists(st.sampled_from([*waits, "message"]), min_size=2, max_size=4))
    if not set(v1_kinds) & set(waits):
        v1_kinds[0] = draw(st.sampled_from(waits))
    v2_kinds = draw(st.lists(st.sampled_from([*waits, "message", "needs"]), min_size=1, max_size=4))
    v1, v2 = draw(chain(v1_kinds)), draw(chain(v2_kinds))
    answered = draw(st.integers(0, sum(kind in waits for _, kind in v1) - 1))
    v2_ids = [node for node, _ in v2]
    mapped = draw(st.lists(st.sampled_from([node for node, _ in v1]), unique=True, max_size=2))
    node_map = {old: draw(st.sampled_from(v2_ids)) for old in mapped}
    return Case(v1, v2, answered, node_map, draw(st.booleans()), draw(st.booleans()))


def definition(agent: str, version: str, nodes: list[tuple[str, str]]) -> AgentDefinition:
    graph: dict[str, Any] = {}
    for index, (node, kind) in enumerate(nodes):
        graph[node] = dict(NODES[kind])
        if index + 1 < len(nodes):
            graph[node]["next"] = nodes[index + 1][0]
    # Extended: every message sent is in the trail with its node, so the last node is always recorded.
    return parse_definition(
        {"agent": agent, "version": version, "auditLevel": "extended", "start": nodes[0][0], "nodes": graph}
    )


async def answer(dsmo: DsmoClient, run_id: str, count: int | None) -> None:
    """Answer ``count`` waits (None: until the run ends), each with the event its kind takes."""
    answered = 0
    while count is None or answered < count:
        view = await dsmo.wait_for_status(
            run_id, {RunStatus.WAITING, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.TIMEOUT}, timeout=30
        )
        if view.status.terminal:
            return
        event_type, data = ANSWERS[str(view.waiting_for)]
        # An id of its own: a run keeps the ids it took across a move, and one taken before it is a duplicate.
        await dsmo.deliver_event(run_id, event_type, data, event_id=f"{run_id}-{uuid.uuid4().hex[:8]}")
        answered += 1
        await _taken(dsmo, run_id, view)


async def _taken(dsmo: DsmoClient, run_id: str, view: StatusView) -> None:
    """Until the run has taken the wait ``view`` shows: the next status must be the next wait, not this one again."""

    def moved_on(after: StatusView) -> bool:
        left = after.status.terminal or after.status is not RunStatus.WAITING
        return left or after.path != view.path or after.current_node != view.current_node

    await until_value(
        lambda: dsmo.status(run_id), moved_on, f"{run_id} takes its wait at {view.current_node}", pause=0.05
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
async def test_a_move_is_refused_before_any_write_or_the_run_ends_on_the_target(harness: Harness, case: Case) -> None:
    dsmo, agent = harness.dsmo, f"prop-{uuid.uuid4().hex[:8]}"
    v1, v2 = definition(agent, "1", case.v1), definition(agent, "2", case.v2)
    await dsmo.publish(v1)
    await dsmo.publish(v2)
    run_id = await harness.start(v1)
    await answer(dsmo, run_id, case.answered)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    history, trail = await history_length(dsmo, run_id), len(await dsmo.events(run_id))
    try:
        await dsmo.migrate_run(
            run_id,
            v2,
            node_map=case.node_map,
            leave_wait=case.leave_wait,
            set_variables={"priority": "high"} if case.supply else None,
        )
    except MigrationNotAccepted as refused:
        assert str(refused).split(": ", 1)[1].split(":", 1)[0] in ("node", "variables", "map"), refused
        assert await history_length(dsmo, run_id) == history
        assert len(await dsmo.events(run_id)) == trail
        await dsmo.cancel(run_id, reason="refused")
        return
    await until_value(
        lambda: dsmo.status(run_id),
        lambda view: view.workflow_version == v2.workflow_version,
        f"{run_id} runs on version 2",
        pause=0.05,
    )
    await answer(dsmo, run_id, None)
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED, result
    events = await dsmo.events(run_id)
    # The last node the run was at is the target's end (the path keeps the id a wait was entered
    # under, so a run that moved at the end node's wait shows version 1's id there).
    assert [e.stage for e in events if e.stage][-1] == case.v2[-1][0]
    assert [e.type for e in events].count("RUN_MIGRATED") == 1
