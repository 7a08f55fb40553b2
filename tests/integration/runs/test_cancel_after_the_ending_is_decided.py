"""A cancel that reaches a run once it has decided how it ends does not cut its settling short.

A reply and a cancel sent while no worker runs the run reach it in one workflow task.

Temporal's Python SDK (legacy job order) runs a task's signals and updates to a standstill before
it applies the task's cancel, so the run has decided on the reply when the cancel lands, often
while it exports its trail at its end. Whichever ending it takes, it says so everywhere: in
Temporal's status, in its result and in the trail exported to the store, and an ending the reply
decided gives back the run's slot and exports its trail (dsmo/workflows/run/decided_ending.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError

from dsmo.activities.audit_log import audit_key
from dsmo.activities.messaging import FileChannel
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import REQUEST_SLOT, WRITE_DEAD_LETTER, DeadLetter
from dsmo.workflows.contracts.slot_io import SlotRequest
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.integration.changes.test_cancel_racing_handover import waiting
from tests.integration.parked_runs import ParkedRuns

pytestmark = pytest.mark.integration

ANSWER_WITHIN = 60.0  # a hang guard for the ending (never a timing assertion)
ENDINGS = {
    RunStatus.COMPLETED: (WorkflowExecutionStatus.COMPLETED, "RUN_COMPLETED"),
    RunStatus.CANCELLED: (WorkflowExecutionStatus.CANCELED, "RUN_ABORTED"),
}
# How each shape ends: the reply decides a run that ends at its wait; a run with a step after it
# is still at that step when the cancel lands.
DECIDED_BY = {"ends-at-the-wait": RunStatus.COMPLETED, "one-at-a-time": RunStatus.COMPLETED}


async def one_task_took_both(harness: Harness, run_id: str) -> bool:
    """Whether the reply and the cancel reached the run in one workflow task (none started between)."""
    history = await harness.dsmo.temporal.get_workflow_handle(run_id).fetch_history()
    kinds = [event.event_type for event in history.events]
    cancelled = kinds.index(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED)
    # The reply is the last signal before the cancel (the slot's grant came by signal earlier).
    replied = max(
        at for at, kind in enumerate(kinds[:cancelled]) if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    )
    return EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED not in kinds[replied:cancelled]


@pytest.mark.parametrize("shape", ["ends-at-the-wait", "sends-after-it", "one-at-a-time"])
async def test_a_reply_and_a_cancel_in_one_task_end_the_run_one_way_everywhere(harness: Harness, shape: str) -> None:
    dsmo = harness.dsmo
    nodes: dict[str, Any] = {"ask": {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}}}
    if shape == "sends-after-it":
        nodes["ask"]["next"] = "thank"
        nodes["thank"] = {"actionType": "send_message", "parameters": {"message": "thanks"}}
    raw: dict[str, Any] = {"agent": f"one-task-{uuid.uuid4().hex[:8]}", "start": "ask", "nodes": nodes}
    if shape == "one-at-a-time":  # the run holds the agent's only slot: its ending gives it back
        raw["rateLimit"] = {"maxConcurrent": 1}
    definition = parse_definition(raw)
    parked = ParkedRuns(harness, "one-task")
    run_id = await parked.park(definition)
    await dsmo.signal_event(run_id, "MESSAGE_RECEIVED", {"event_id": "reply-1", "text": "yes"})
    await dsmo.cancel(run_id, reason="customer withdrew")
    async with parked.worker():
        result = await asyncio.wait_for(dsmo.result(run_id), ANSWER_WITHIN)
        if shape == "one-at-a-time":
            next_run = (await dsmo.start(definition, task_queue=parked.queue)).run_id
            harness.started.append(next_run)
            await waiting(harness, next_run)  # admitted: the slot was given back
    assert await one_task_took_both(harness, run_id), "the reply and the cancel reached the run in two tasks"
    assert result.status is DECIDED_BY.get(shape, RunStatus.CANCELLED), result
    temporal_status, last_type = ENDINGS[result.status]
    assert (await dsmo.temporal.get_workflow_handle(run_id).describe()).status is temporal_status
    exported = [
        json.loads(line) for line in harness.store.read_bytes(harness.store.uri(audit_key(run_id))).splitlines()
    ]
    endings = [event for event in exported if event["type"] in ("RUN_COMPLETED", "RUN_ABORTED")]
    assert [event["type"] for event in endings] == [last_type], endings
    assert exported[-1]["type"] == last_type, exported[-1]
    # Nothing the ending called (the slot's release, the export) was cut short by the cancel.
    assert not [event for event in exported if event["type"] == "SERVICE_FAILED"], exported


class HeldDeadLetters:
    """The worker's dead-letter write, held until the test lets it go, then made as the worker makes it."""

    def __init__(self, harness: Harness) -> None:
        self.store = harness.store
        self.writing, self.let_go = threading.Event(), threading.Event()

    @activity.defn(name=WRITE_DEAD_LETTER)
    def write_dead_letter(self, letter: DeadLetter) -> str:
        self.writing.set()
        self.let_go.wait(ANSWER_WITHIN)
        document = letter.model_dump(mode="json", exclude={"seal"})
        return self.store.put_json_once(f"dlq/{letter.run_id}/{letter.stage}.json", document).uri


@activity.defn(name=REQUEST_SLOT)
def refused_slot(slot: SlotRequest) -> None:
    raise ApplicationError(f"no limiter for {slot.agent}", non_retryable=True)


@contextlib.asynccontextmanager
async def deciding_to_fail(harness: Harness, prefix: str) -> AsyncIterator[tuple[str, HeldDeadLetters]]:
    """A run that could not get its agent's slot (the service refused it), so has decided to fail,
    held while it writes its dead letter: its id and the hold, let go when the block ends."""
    dsmo, held = harness.dsmo, HeldDeadLetters(harness)
    raw: dict[str, Any] = {
        "agent": f"{prefix}-{uuid.uuid4().hex[:8]}",
        "start": "ask",
        "rateLimit": {"maxConcurrent": 1},
        "nodes": {"ask": {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}}},
    }
    queue = f"{prefix}-{uuid.uuid4().hex[:8]}"
    worker = build_worker(
        dsmo.temporal,
        task_queue=queue,
        store=harness.store,
        channel=FileChannel(harness.outbox),
        overrides=[held.write_dead_letter, refused_slot],
    )
    try:
        async with worker:
            run_id = (await dsmo.start(parse_definition(raw), task_queue=queue)).run_id
            harness.started.append(run_id)
            assert await asyncio.to_thread(held.writing.wait, ANSWER_WITHIN), "no dead letter was written"
            yield run_id, held
    finally:
        held.let_go.set()


async def test_a_cancel_while_a_run_dead_letters_a_spent_service_leaves_it_failed_with_its_record(
    harness: Harness,
) -> None:
    """The run could not get its slot (the service refused): it has decided to fail, and a cancel
    that lands while its dead letter is written waits for it instead of ending the run unrecorded."""
    dsmo = harness.dsmo
    async with deciding_to_fail(harness, "no-slot") as (run_id, held):
        await dsmo.cancel(run_id, reason="customer withdrew")
        held.let_go.set()
        result = await asyncio.wait_for(dsmo.result(run_id), ANSWER_WITHIN)
    assert result.status is RunStatus.FAILED, result
    assert (await dsmo.temporal.get_workflow_handle(run_id).describe()).status is WorkflowExecutionStatus.FAILED
    assert harness.store.read_json(harness.store.uri(f"dlq/{run_id}/ask.json"))["service"] == REQUEST_SLOT
    exported = [
        json.loads(line) for line in harness.store.read_bytes(harness.store.uri(audit_key(run_id))).splitlines()
    ]
    kinds = [event["type"] for event in exported]
    assert "DEAD_LETTERED" in kinds and kinds[-1] == "RUN_ABORTED", kinds
