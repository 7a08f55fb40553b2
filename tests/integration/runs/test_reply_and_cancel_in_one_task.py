"""A reply and a cancel sent while no worker runs the run reach it in one workflow task.

Temporal's Python SDK (legacy job order) runs a task's signals and updates to a standstill before
it applies the task's cancel, so the run has decided on the reply when the cancel lands, often
while it exports its trail at its end. Whichever ending it takes, it says so everywhere: in
Temporal's status, in its result and in the trail exported to the store.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from dsmo.activities.audit_log import audit_key
from dsmo.activities.messaging import FileChannel
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.integration.changes.test_cancel_racing_handover import waiting

pytestmark = pytest.mark.integration

ANSWER_WITHIN = 60.0  # a hang guard for the ending (never a timing assertion)
ENDINGS = {
    RunStatus.COMPLETED: (WorkflowExecutionStatus.COMPLETED, "RUN_COMPLETED"),
    RunStatus.CANCELLED: (WorkflowExecutionStatus.CANCELED, "RUN_ABORTED"),
}


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
    queue = f"one-task-{uuid.uuid4().hex[:8]}"

    def worker() -> Any:
        return build_worker(dsmo.temporal, task_queue=queue, store=harness.store, channel=FileChannel(harness.outbox))

    async with worker():
        run_id = (await dsmo.start(definition, task_queue=queue)).run_id
        harness.started.append(run_id)
        await waiting(harness, run_id)
    await dsmo.signal_event(run_id, "MESSAGE_RECEIVED", {"event_id": "reply-1", "text": "yes"})
    await dsmo.cancel(run_id, reason="customer withdrew")
    async with worker():
        result = await asyncio.wait_for(dsmo.result(run_id), ANSWER_WITHIN)
        if shape == "one-at-a-time":
            next_run = (await dsmo.start(definition, task_queue=queue)).run_id
            harness.started.append(next_run)
            await waiting(harness, next_run)  # admitted: the slot was given back
    assert result.status in ENDINGS, result
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
