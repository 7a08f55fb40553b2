"""A cancel that lands while a saga step runs waits for the step: its effect lands all the same,
so the run records it and the unwinding undoes it with the steps before it, last first."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest

from dsmo.activities.actions import ActionContext, ActionRegistry, FunctionAction
from dsmo.client.definition_files import parse_definition_text
from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness

pytestmark = pytest.mark.integration

FLOW = """
agent: {agent}
start: hold
nodes:
  hold:
    actionType: invoke
    action: midstep-hold
    compensate: {{kind: annulment}}
    next: charge
  charge:
    actionType: invoke
    action: midstep-charge
    compensate: {{kind: reversal}}
    next: bye
  bye:
    actionType: send_message
    parameters: {{message: "done"}}
"""

CHARGING, RELEASE = threading.Event(), threading.Event()
UNDONE: list[str] = []


def _hold(data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
    return {"held": ctx.key}


def _charge(data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
    CHARGING.set()
    RELEASE.wait(60)  # held until the cancel has reached the run (a hang guard)
    return {"charged": ctx.key}


def _undo(output: dict[str, Any], ctx: ActionContext) -> bool:
    UNDONE.append(next(iter(output)))
    return True


@pytest.fixture
def actions() -> ActionRegistry:
    registry = ActionRegistry()
    registry.add(FunctionAction("midstep-hold", _hold, _undo))
    registry.add(FunctionAction("midstep-charge", _charge, _undo))
    return registry


async def test_a_cancel_while_a_step_runs_waits_for_it_and_undoes_it_too(harness: Harness) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(parse_definition_text(FLOW.format(agent=f"midstep-{uuid.uuid4().hex[:6]}")))
    assert await asyncio.to_thread(CHARGING.wait, 30)
    await dsmo.cancel(run_id, reason="changed my mind")

    async def cancel_recorded() -> bool:
        events = (await dsmo.temporal.get_workflow_handle(run_id).fetch_history()).events
        return any(e.HasField("workflow_execution_cancel_requested_event_attributes") for e in events)

    for _ in range(300):
        if await cancel_recorded():
            break
        await asyncio.sleep(0.05)
    RELEASE.set()  # the charge lands after the cancel was asked

    result = await asyncio.wait_for(dsmo.result(run_id), 60)
    assert result.status is RunStatus.CANCELLED
    undone = result.compensation or {}
    assert (undone.get("status"), undone.get("compensated")) == ("complete", ["charge", "hold"]), undone
    assert UNDONE == ["charged", "held"]  # each undone once, last first
    trail = [(e.type, e.stage) for e in await dsmo.events(run_id)]
    assert trail.index(("STAGE_SUCCEEDED", "charge")) < trail.index(("RUN_ABORTED", "charge"))
