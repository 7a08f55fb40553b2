"""Long-lived runs: continue-as-new keeps the event-id ledger; a worker restart loses nothing;
seed-style log lines appear once even when every workflow task replays."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

from dsmo.activities.messaging import FileChannel
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness

pytestmark = pytest.mark.integration


def two_waits() -> AgentDefinition:
    return parse_definition(
        {
            "agent": "long-run",
            "start": "first",
            "nodes": {
                "first": {"actionType": "wait_for_response", "next": "second"},
                "second": {"actionType": "wait_for_response", "next": "bye"},
                "bye": {"actionType": "send_message", "parameters": {"message": "bye {{lastResponse}}"}},
            },
        }
    )


async def test_duplicates_are_ignored_across_continue_as_new(harness: Harness) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(two_waits(), history_limit=40)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    first_run = (await dsmo.temporal.get_workflow_handle(run_id).describe()).run_id
    await dsmo.respond(run_id, "one", event_id="evt-1")
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    # Noise grows the history past the limit while the run waits at `second`. Signals that
    # arrive together share one workflow task (fewer events), so send until the run rolls over.
    handle = dsmo.temporal.get_workflow_handle(run_id)
    described = await handle.describe()
    for index in range(60):
        await handle.signal("MESSAGE_RECEIVED", {"text": f"no id {index}"})
        await asyncio.sleep(0.05)
        described = await handle.describe()
        if described.run_id != first_run:
            break
    deadline = asyncio.get_running_loop().time() + 60  # a hang guard only
    while described.run_id == first_run and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
        described = await handle.describe()
    assert described.run_id != first_run, "the run did not continue as new"
    view = await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    assert view.current_node == "second" and view.waiting_for == "response"

    # The id delivered before continue-as-new is still known: a duplicate, not a new reply.
    again = await dsmo.respond(run_id, "one", event_id="evt-1")
    assert again.duplicate and not again.accepted
    await dsmo.respond(run_id, "two", event_id="evt-2")
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.variables["lastResponse"] == "two"

    events = await dsmo.events(run_id)
    types = [e.type for e in events]
    assert "RUN_CONTINUED" in types and types.count("RUN_CREATED") == 1
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # one trail across runs
    assert [e.data["eventId"] for e in events if e.type == "DUPLICATE_IGNORED"] == ["evt-1"]
    assert [m["message"] for m in harness.messages(run_id)] == ["bye two"]


async def test_worker_restart_while_runs_wait(harness: Harness) -> None:
    """Seed's recovery: after a restart the waiting runs resume on their events and complete."""
    dsmo = harness.dsmo
    task_queue = f"restart-{uuid.uuid4().hex[:8]}"
    channel = FileChannel(harness.outbox)
    async with build_worker(dsmo.temporal, task_queue=task_queue, store=harness.store, channel=channel):
        run_ids = [(await dsmo.start(two_waits(), task_queue=task_queue)).run_id for _ in range(5)]
        for run_id in run_ids:
            await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    # No worker now: events are accepted by the server and wait for one.
    for run_id in run_ids:
        await dsmo.signal_event(run_id, "MESSAGE_RECEIVED", {"event_id": f"{run_id}-1", "text": "first"})
    async with build_worker(dsmo.temporal, task_queue=task_queue, store=harness.store, channel=channel):
        for run_id in run_ids:
            view = await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
            assert view.current_node == "second"
            await dsmo.respond(run_id, "second")
        results = [await dsmo.result(run_id) for run_id in run_ids]
    assert all(r.status is RunStatus.COMPLETED for r in results)
    assert all(len(harness.messages(run_id)) == 1 for run_id in run_ids)


async def test_seed_log_lines_once_even_when_every_task_replays(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    dsmo = harness.dsmo
    task_queue = f"logs-{uuid.uuid4().hex[:8]}"
    caplog.set_level(logging.INFO, logger="temporalio.workflow")
    worker = build_worker(
        dsmo.temporal,
        task_queue=task_queue,
        store=harness.store,
        channel=FileChannel(harness.outbox),
        max_cached_workflows=0,
    )
    async with worker:
        run_id = (await dsmo.start(two_waits(), task_queue=task_queue)).run_id
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        await dsmo.respond(run_id, "a")
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        await dsmo.respond(run_id, "b")
        await dsmo.result(run_id)
    lines = [r.getMessage() for r in caplog.records if run_id in r.getMessage() or "Action" in r.getMessage()]
    mine = [line for line in lines if run_id in line]
    assert sum(line.startswith(f"Starting execution {run_id}") for line in mine) == 1
    assert sum(f"Execution {run_id} entering WAITING state (waitingFor: response)" in line for line in mine) == 2
    assert sum(line.startswith(f"Resuming execution {run_id}") for line in mine) == 2
    assert sum(f"Execution {run_id} completed with result: success" in line for line in mine) == 1
    started = [line for line in lines if line.startswith("Action 3: send_message (bye) - starting")]
    assert len(started) == 1
