"""A run hands over to its next generation after a round trip to the server
(dsmo/workflows/engine/hand_over.py): whatever arrives while it is out is dealt with.

The round trip is held by the test (the worker's `hand_over_round_trip` replaced by one that
waits to be let go), so each case lands in it every time, not by chance as in the race test.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from dsmo.activities.audit_log import audit_key, segment_key, verify_lines
from dsmo.activities.messaging import FileChannel
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import HAND_OVER_ROUND_TRIP
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from dsmo.workflows.run.audit import TAIL_CARRIED_MAX
from dsmo.workflows.run.trail_segments import INLINE_VALUES_MAX
from tests.conftest import Harness
from tests.integration.changes.test_cancel_racing_handover import waiting
from tests.polling import until

pytestmark = pytest.mark.integration

SAYS = 8  # messages before the wait: the run hands over between two of them
ANSWER_WITHIN = 60.0  # a hang guard for each answer and ending (never a timing assertion)


class HeldRoundTrip:
    """The worker's round trip, held until the test lets it go (then every later one passes)."""

    def __init__(self) -> None:
        self.out = asyncio.Event()
        self.let_go = asyncio.Event()

    @activity.defn(name=HAND_OVER_ROUND_TRIP)
    async def round_trip(self) -> None:
        self.out.set()
        await asyncio.wait_for(self.let_go.wait(), ANSWER_WITHIN)


@pytest.fixture
async def held(harness: Harness) -> AsyncIterator[tuple[HeldRoundTrip, str]]:
    trip = HeldRoundTrip()
    queue = f"round-trip-{uuid.uuid4().hex[:8]}"
    worker = build_worker(
        harness.dsmo.temporal,
        task_queue=queue,
        store=harness.store,
        channel=FileChannel(harness.outbox),
        overrides=[trip.round_trip],
    )
    async with worker:
        try:
            yield trip, queue
        finally:
            trip.let_go.set()


def chain(agent: str, version: str) -> AgentDefinition:
    """Messages one after another, then a wait: with a short history limit it hands over between two."""
    nodes: dict[str, Any] = {
        f"say{index}": {
            "actionType": "send_message",
            "parameters": {"message": f"part {index}"},
            "next": f"say{index + 1}" if index + 1 < SAYS else "shipped",
        }
        for index in range(SAYS)
    }
    nodes["shipped"] = {"actionType": "wait_for_event", "parameters": {"event": "shipped", "timeout": "1h"}}
    return parse_definition({"agent": agent, "version": version, "start": "say0", "nodes": nodes})


async def test_a_cancel_while_the_round_trip_is_out_ends_the_run_cancelled_and_exported(
    harness: Harness, held: tuple[HeldRoundTrip, str]
) -> None:
    trip, queue = held
    dsmo = harness.dsmo
    run_id = (await dsmo.start(chain(f"trip-{uuid.uuid4().hex[:8]}", "1"), task_queue=queue, history_limit=20)).run_id
    harness.started.append(run_id)
    await asyncio.wait_for(trip.out.wait(), ANSWER_WITHIN)
    handing_over = (await dsmo.temporal.get_workflow_handle(run_id).describe()).run_id
    await dsmo.cancel(run_id, reason="customer withdrew")
    result = await asyncio.wait_for(dsmo.result(run_id), ANSWER_WITHIN)
    assert result.status is RunStatus.CANCELLED, result
    description = await dsmo.temporal.get_workflow_handle(run_id).describe()
    # The generation that was handing over ended Canceled: it did not hand over first.
    assert (description.run_id, description.status) == (handing_over, WorkflowExecutionStatus.CANCELED)
    assert harness.store.read_bytes(harness.store.uri(audit_key(run_id))), "no trail was exported"
    trail = await dsmo.events(run_id)
    assert [event.data["status"] for event in trail if event.type == "RUN_ABORTED"] == ["cancelled"]


async def test_a_move_asked_while_the_run_hands_over_between_nodes_is_made_at_the_hand_over(
    harness: Harness, held: tuple[HeldRoundTrip, str]
) -> None:
    trip, queue = held
    dsmo = harness.dsmo
    agent = f"trip-{uuid.uuid4().hex[:8]}"
    v1, v2 = chain(agent, "1"), chain(agent, "2")
    await dsmo.publish(v1)
    await dsmo.publish(v2)
    run_id = (await dsmo.start(v1, task_queue=queue, history_limit=20)).run_id
    harness.started.append(run_id)
    await asyncio.wait_for(trip.out.wait(), ANSWER_WITHIN)
    first = (await dsmo.temporal.get_workflow_handle(run_id).describe()).run_id
    move = asyncio.create_task(dsmo.migrate_run(run_id, v2, reason="new wording"))

    async def accepted() -> bool:
        history = await dsmo.temporal.get_workflow_handle(run_id, run_id=first).fetch_history()
        return any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED for e in history.events)

    await until(accepted, "the move was accepted by the generation handing over")
    trip.let_go.set()
    ack = await asyncio.wait_for(move, ANSWER_WITHIN)
    assert (ack.from_version, ack.to_version) == ("1", "2")
    view = await until_waiting_on(harness, run_id)
    assert view.workflow_version == v2.workflow_version, view
    await dsmo.cancel(run_id, reason="done")


async def until_waiting_on(harness: Harness, run_id: str) -> Any:
    await waiting(harness, run_id)
    return await harness.dsmo.status(run_id)


def first_generation_events(harness: Harness, run_id: str, first: str) -> Any:
    return harness.dsmo.temporal.get_workflow_handle(run_id, run_id=first).fetch_history()


def names_of(history: Any) -> list[str]:
    return [EventType.Name(event.event_type).removeprefix("EVENT_TYPE_") for event in history.events]


def round_trips(history: Any) -> list[int]:
    return [
        index
        for index, event in enumerate(history.events)
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.activity_type.name == HAND_OVER_ROUND_TRIP
    ]


async def test_a_hand_over_after_a_result_of_its_own_starts_after_the_round_trip(harness: Harness) -> None:
    """Why a cancel can no longer be left behind: a run that hands over from between two nodes
    (after a result of its own) does so in a task the server started for the round trip's
    completion, which carries every event sent before it."""
    agent = f"hand-over-{uuid.uuid4().hex[:8]}"
    run_id = await harness.start(chain(agent, "1"), history_limit=20)
    await waiting(harness, run_id)
    first = ""
    async for execution in harness.dsmo.temporal.list_workflows(f"WorkflowId = '{run_id}'"):
        first = execution.run_id  # the oldest generation comes last
    history = await first_generation_events(harness, run_id, first)
    names = names_of(history)
    assert names[-1] == "WORKFLOW_EXECUTION_CONTINUED_AS_NEW", names[-6:]
    trips = round_trips(history)
    assert trips, f"no round trip before the hand-over: {names[-12:]}"
    last_started = max(index for index, name in enumerate(names) if name == "WORKFLOW_TASK_STARTED")
    assert "ACTIVITY_TASK_COMPLETED" in names[trips[-1] : last_started], names[trips[-1] :]
    await harness.dsmo.cancel(run_id, reason="done")


async def test_a_waiting_run_moved_hands_over_in_the_task_its_move_arrived_in(harness: Harness) -> None:
    """A move decided by its update's arrival hands over in that task: no round trip and no
    segment written (the small tail travels in the checkpoint), the answer with the hand-over;
    the trail stays one chain to the export."""
    dsmo, store = harness.dsmo, harness.store
    agent = f"at-once-{uuid.uuid4().hex[:8]}"
    v1, v2 = chain(agent, "1"), chain(agent, "2")
    await dsmo.publish(v1)
    await dsmo.publish(v2)
    run_id = await harness.start(v1)
    await waiting(harness, run_id)
    first = (await dsmo.temporal.get_workflow_handle(run_id).describe()).run_id
    ack = await dsmo.migrate_run(run_id, v2, reason="new wording")
    assert (ack.from_version, ack.to_version, ack.waiting) == ("1", "2", True)
    # Answered with the hand-over: the run is already on its next execution.
    assert (await dsmo.temporal.get_workflow_handle(run_id).describe()).run_id != first
    history = await first_generation_events(harness, run_id, first)
    names = names_of(history)
    last_completed = max(index for index, name in enumerate(names) if name == "WORKFLOW_TASK_COMPLETED")
    assert not round_trips(history), names[-12:]
    # The update was taken and answered, and the run handed over, in the task it arrived in,
    # with no local activity (a marker) in that task.
    tail = names[last_completed:]
    assert tail[0] == "WORKFLOW_TASK_COMPLETED" and tail[-1] == "WORKFLOW_EXECUTION_CONTINUED_AS_NEW", tail
    assert {"WORKFLOW_EXECUTION_UPDATE_ACCEPTED", "WORKFLOW_EXECUTION_UPDATE_COMPLETED"} <= set(tail), tail
    assert "MARKER_RECORDED" not in tail, tail
    assert store.stored_or_none(segment_key(run_id, 1)) is None, "the move wrote a segment"
    await waiting(harness, run_id)
    await dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "shipped"}, event_id="shipped")
    assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
    trail = await dsmo.events(run_id)
    assert [event.seq for event in trail] == list(range(1, len(trail) + 1))
    assert [event.type for event in trail].count("RUN_MIGRATED") == 1
    body = store.read_bytes(store.uri(audit_key(run_id)))
    check = verify_lines(body, [event.model_dump(mode="json") for event in trail], (await dsmo.trail(run_id)).head)
    assert check.ok, check.problem


def listening(agent: str, version: str) -> AgentDefinition:
    """A loop that takes messages until one says stop."""
    return parse_definition(
        {
            "agent": agent,
            "version": version,
            "start": "listen",
            "nodes": {
                "listen": {
                    "actionType": "wait_for_event",
                    "parameters": {"event": "message", "timeout": "1h"},
                    "transitions": [{"when": 'eventResult == "stop"', "to": "bye"}, {"to": "listen"}],
                },
                "bye": {"actionType": "send_message", "parameters": {"message": "bye"}},
            },
        }
    )


async def test_a_waiting_run_with_a_large_tail_writes_its_segment_and_makes_the_round_trip(harness: Harness) -> None:
    """A tail the checkpoint may not carry is written as a segment at the move (a local
    activity), so the run makes the round trip before it hands over."""
    dsmo, store = harness.dsmo, harness.store
    agent = f"large-tail-{uuid.uuid4().hex[:8]}"
    v1, v2 = listening(agent, "1"), listening(agent, "2")
    await dsmo.publish(v1)
    await dsmo.publish(v2)
    run_id = await harness.start(v1)
    notes = "n" * (INLINE_VALUES_MAX - 200)  # kept inline in the trail, not by reference
    for index in range(TAIL_CARRIED_MAX // len(notes) + 1):
        await waiting(harness, run_id)
        ack = await dsmo.deliver_event(
            run_id, "EVENT_COMPLETED", {"result": "said", "data": {"notes": notes}}, event_id=f"m-{index}"
        )
        assert ack.accepted, ack
    await waiting(harness, run_id)
    first = (await dsmo.temporal.get_workflow_handle(run_id).describe()).run_id
    await dsmo.migrate_run(run_id, v2, reason="new wording")
    history = await first_generation_events(harness, run_id, first)
    assert round_trips(history), names_of(history)[-12:]
    assert store.stored_or_none(segment_key(run_id, 1)) is not None, "the move carried a large tail"
    await dsmo.cancel(run_id, reason="done")
