"""A run hands over to its next generation after a round trip to the server
(dsmo/workflows/engine/hand_over.py): whatever arrives while it is out is dealt with.

The round trip is held by the test (the worker's `hand_over_round_trip` replaced by one that
waits to be let go), so each case lands in it every time, not by chance as in the race test.
A move and a cancel sent while no worker runs the run reach it in one task: why a waiting run's
move makes the round trip too.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError

from dsmo.activities.audit_log import audit_key
from dsmo.activities.messaging import FileChannel
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import HAND_OVER_ROUND_TRIP
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness
from tests.integration.changes.test_cancel_racing_handover import waiting
from tests.integration.parked_runs import ParkedRuns
from tests.polling import until, until_value

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


async def test_the_task_that_hands_over_starts_after_the_round_trip_and_answers_the_move_with_it(
    harness: Harness,
) -> None:
    """Why a cancel can no longer be left behind: the generation's last task is one the server
    started for the round trip's completion (so it carries every event sent before), and the
    move's answer goes out in that task, with the hand-over."""
    agent = f"hand-over-{uuid.uuid4().hex[:8]}"
    v1, v2 = chain(agent, "1"), chain(agent, "2")
    await harness.dsmo.publish(v1)
    await harness.dsmo.publish(v2)
    run_id = await harness.start(v1)
    await waiting(harness, run_id)
    first = (await harness.dsmo.temporal.get_workflow_handle(run_id).describe()).run_id
    ack = await harness.dsmo.migrate_run(run_id, v2, reason="longer wait")
    assert ack.to_version == "2"
    # Answered with the hand-over: the run is already on its next execution.
    assert (await harness.dsmo.temporal.get_workflow_handle(run_id).describe()).run_id != first
    history = await harness.dsmo.temporal.get_workflow_handle(run_id, run_id=first).fetch_history()
    names = [EventType.Name(event.event_type).removeprefix("EVENT_TYPE_") for event in history.events]
    assert names[-1] == "WORKFLOW_EXECUTION_CONTINUED_AS_NEW", names[-6:]
    trips = [
        index
        for index, event in enumerate(history.events)
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.activity_type.name == HAND_OVER_ROUND_TRIP
    ]
    assert trips, f"no round trip before the hand-over: {names[-12:]}"
    last_started = max(index for index, name in enumerate(names) if name == "WORKFLOW_TASK_STARTED")
    last_completed = max(index for index, name in enumerate(names) if name == "WORKFLOW_TASK_COMPLETED")
    assert "ACTIVITY_TASK_COMPLETED" in names[trips[-1] : last_started], names[trips[-1] :]
    assert "WORKFLOW_EXECUTION_UPDATE_COMPLETED" in names[last_completed:], names[trips[-1] :]
    await harness.dsmo.cancel(run_id, reason="done")


async def test_a_move_and_a_cancel_that_reach_the_run_in_one_task_end_it_cancelled(harness: Harness) -> None:
    """A move and a cancel sent while no worker runs the run reach it in one workflow task: the
    run ends cancelled, whichever the task takes first, instead of handing over to a next
    execution that never heard of the cancel."""
    dsmo = harness.dsmo
    agent = f"one-task-{uuid.uuid4().hex[:8]}"
    parked = ParkedRuns(harness, "one-task")
    run_id, first = await parked.park_to_move(chain(agent, "1"), chain(agent, "2"))
    move = await parked.held_move(run_id, chain(agent, "2"))
    await dsmo.temporal.get_workflow_handle(run_id).cancel()
    async with parked.worker():
        with contextlib.suppress(WorkflowUpdateFailedError):  # refused, or made: either way answered
            await asyncio.wait_for(move, ANSWER_WITHIN)
        generation = dsmo.temporal.get_workflow_handle(run_id, run_id=first)
        closed = await until_value(
            generation.describe,
            lambda view: view.status is not WorkflowExecutionStatus.RUNNING,
            "the execution that took both ended",
        )
        # Not CONTINUED_AS_NEW: a next execution would never hear of the cancel.
        assert closed.status is WorkflowExecutionStatus.CANCELED, closed.status
        result = await asyncio.wait_for(dsmo.result(run_id), ANSWER_WITHIN)
    assert result.status is RunStatus.CANCELLED, result
