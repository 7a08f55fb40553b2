"""A cancel that lands while an `invoke` step's output is being recorded (sealed, in a run about a
data subject) still undoes the step: the action has happened, so it is on the saga stack before
anything is awaited, and the step is recorded before the cancel goes through."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType

from dsmo.activities.actions import ActionContext, ActionRegistry, FunctionAction
from dsmo.activities.audit_log import AuditActivities
from dsmo.activities.messaging import FileChannel
from dsmo.client.definition_files import parse_definition_text
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import STORE_EVENT_VALUES
from dsmo.workflows.contracts.trail_io import EventValues
from tests.conftest import Harness
from tests.polling import until

pytestmark = pytest.mark.integration

FLOW = """
agent: {agent}
inputs: [order]
subject: "{{{{order.customer}}}}"
start: charge
nodes:
  charge:
    actionType: invoke
    action: cancel-charge
    input: {{amount: 10}}
    compensate: {{kind: reversal}}
    next: ship
  ship:
    actionType: wait_for_event
    parameters: {{event: shipped, timeout: 1h}}
"""

UNDONE: list[dict[str, Any]] = []
CANCEL_REQUESTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
TASK_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED


def _charge(data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
    return {"charged": data["amount"]}


def _refund(output: dict[str, Any], ctx: ActionContext) -> bool:
    UNDONE.append(output)
    return True


@pytest.fixture
def actions() -> ActionRegistry:
    registry = ActionRegistry()
    registry.add(FunctionAction("cancel-charge", _charge, _refund))
    return registry


async def test_a_cancel_while_the_output_is_recorded_still_undoes_the_step(
    harness: Harness, actions: ActionRegistry
) -> None:
    dsmo = harness.dsmo
    writing, release = threading.Event(), threading.Event()
    audit = AuditActivities(harness.store)

    @activity.defn(name=STORE_EVENT_VALUES)
    def held_values(values: EventValues) -> str:
        writing.set()
        release.wait(120)  # a hang guard: the test releases it
        return audit.store_event_values(values)

    queue = f"cancel-recording-{uuid.uuid4().hex[:8]}"
    worker = build_worker(
        dsmo.temporal,
        task_queue=queue,
        store=harness.store,
        channel=FileChannel(harness.outbox),
        actions=actions,
        overrides=[held_values],
    )
    definition = parse_definition_text(FLOW.format(agent=f"cancel-rec-{uuid.uuid4().hex[:8]}"))
    async with worker:
        run_id = (
            await dsmo.start(definition, {"order": {"customer": f"C-{uuid.uuid4().hex[:6]}"}}, task_queue=queue)
        ).run_id
        harness.started.append(run_id)
        assert await asyncio.to_thread(writing.wait, 60), "the step's output was never recorded"
        await dsmo.cancel(run_id, reason="customer changed their mind")
        # The run sees the cancel while the write is held: Temporal hands it a workflow task
        # (the one a local activity's heartbeat ends) after the request. Then the write finishes.
        await _cancel_seen(harness, run_id)
        release.set()
        result = await dsmo.result(run_id)
        trail = await dsmo.events(run_id)
    assert result.status is RunStatus.CANCELLED
    kinds = [(event.type, event.stage) for event in trail]
    assert ("STAGE_SUCCEEDED", "charge") in kinds  # the step is recorded ...
    assert ("COMPENSATION_SUCCEEDED", "charge") in kinds  # ... and undone
    assert kinds.index(("STAGE_SUCCEEDED", "charge")) < kinds.index(("COMPENSATION_SUCCEEDED", "charge"))
    assert {"charged": 10} in UNDONE
    assert "ship" not in result.path  # the cancel went through where it landed


async def _cancel_seen(harness: Harness, run_id: str) -> None:
    handle = harness.dsmo.temporal.get_workflow_handle(run_id)

    async def seen() -> bool:  # a workflow task follows within Temporal's task timeout
        kinds = [event.event_type async for event in handle.fetch_history_events()]
        return CANCEL_REQUESTED in kinds and TASK_COMPLETED in kinds[kinds.index(CANCEL_REQUESTED) :]

    await until(seen, "the run takes a workflow task after the cancel")
