"""A cancel racing a move's hand-over ends the run cancelled, whichever generation it lands on.

Twenty runs each wait with two saga steps done; each is asked to move to another version and,
after a delay that differs from run to run (so that some cancels land before the move is
decided, some while the run hands over to its next generation, some after), is cancelled. Every
run must end Canceled in Temporal, its trail saying so, each step undone exactly once and its
trail exported; the move is answered (made, or refused with the reason) and never left hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import uuid
from collections import Counter
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowExecutionStatus

from dsmo.activities.actions import ActionContext, ActionRegistry, FunctionAction
from dsmo.activities.audit_log import audit_key
from dsmo.client.client_errors import MigrationNotAccepted, RunClosed
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness
from tests.polling import until_value

pytestmark = pytest.mark.integration

TRIES = 20
AT_ONCE = 5  # runs raced at a time (the stack is shared)
STEPS = ["s1", "s2"]
# A hang guard for each answer and each ending (never a timing assertion).
ANSWER_WITHIN = 60.0

LOCK = threading.Lock()
UNDONE: Counter[tuple[str, str]] = Counter()  # (run, step) -> times undone


def _do(data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
    return {"step": data["step"]}


def _undo(output: dict[str, Any], ctx: ActionContext) -> bool:
    with LOCK:
        UNDONE[(ctx.run_id, output["step"])] += 1
    return True


@pytest.fixture
def actions() -> ActionRegistry:
    registry = ActionRegistry()
    registry.add(FunctionAction("counted-step", _do, _undo))
    return registry


def flow(agent: str, version: str, timeout: str) -> AgentDefinition:
    nodes: dict[str, Any] = {
        step: {
            "actionType": "invoke",
            "action": "counted-step",
            "input": {"step": step},
            "compensate": {"kind": "reversal"},
            "next": STEPS[index + 1] if index + 1 < len(STEPS) else "shipped",
        }
        for index, step in enumerate(STEPS)
    }
    nodes["shipped"] = {
        "actionType": "wait_for_event",
        "parameters": {"event": "shipped", "timeout": timeout, "onTimeout": "fail"},
    }
    return parse_definition({"agent": agent, "version": version, "start": STEPS[0], "nodes": nodes})


async def waiting(harness: Harness, run_id: str) -> None:
    await until_value(
        lambda: harness.dsmo.status(run_id), lambda view: view.status is RunStatus.WAITING, f"{run_id} waits"
    )


async def race(harness: Harness, v1: AgentDefinition, v2: AgentDefinition, delay: float) -> tuple[str, str]:
    """One run: move it to v2, cancel it ``delay`` seconds later; how the move was answered."""
    dsmo = harness.dsmo
    run_id = await harness.start(v1)
    await waiting(harness, run_id)
    move = asyncio.create_task(dsmo.migrate_run(run_id, v2, reason="longer wait"))
    await asyncio.sleep(delay)
    await dsmo.cancel(run_id, reason="customer withdrew")
    try:
        await asyncio.wait_for(move, ANSWER_WITHIN)
        answer = "moved"
    except (MigrationNotAccepted, RunClosed) as refused:  # RunClosed: the cancel ended it before the move was taken
        message = str(refused)
        assert message and "\n" not in message, message
        answer = f"refused: {message}"
    return run_id, answer


async def ended_cancelled(harness: Harness, run_id: str) -> None:
    handle = harness.dsmo.temporal.get_workflow_handle(run_id)
    try:
        result = await asyncio.wait_for(harness.dsmo.result(run_id), ANSWER_WITHIN)
    except TimeoutError:  # a run left running by a cancel: what its executions did, for the fix
        raise AssertionError(f"{run_id} did not end:\n{await executions_of(harness, run_id)}") from None
    assert result.status is RunStatus.CANCELLED, (run_id, result)
    assert (await handle.describe()).status is WorkflowExecutionStatus.CANCELED, run_id
    assert {step: UNDONE[(run_id, step)] for step in STEPS} == dict.fromkeys(STEPS, 1), run_id
    assert harness.store.read_bytes(harness.store.uri(audit_key(run_id))), f"{run_id}: no trail was exported"
    trail = await harness.dsmo.events(run_id)  # read from the export
    ends = [event.data["status"] for event in trail if event.type == "RUN_ABORTED"]
    assert ends == ["cancelled"], (run_id, ends)
    undone = sorted(event.stage or "" for event in trail if event.type == "COMPENSATION_SUCCEEDED")
    assert undone == STEPS, (run_id, undone)


async def executions_of(harness: Harness, run_id: str) -> str:
    """Each Temporal execution of the run, with its history's event types (a failure's evidence)."""
    lines = []
    async for execution in harness.dsmo.temporal.list_workflows(f"WorkflowId = '{run_id}'"):
        history = await harness.dsmo.temporal.get_workflow_handle(run_id, run_id=execution.run_id).fetch_history()
        types = [_described(event) for event in history.events]
        lines.append(f"{execution.run_id} {execution.status}: {' '.join(types)}")
    return "\n".join(lines)


def _described(event: HistoryEvent) -> str:
    """An event's type; why a failed workflow task failed, and which local activity a marker
    records (the evidence a lost cancel needs: which task wrote what)."""
    name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
        failed = event.workflow_task_failed_event_attributes
        cause = WorkflowTaskFailedCause.Name(failed.cause).removeprefix("WORKFLOW_TASK_FAILED_CAUSE_")
        return f"{name}({cause}: {failed.failure.message[:120]})"
    if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
        data = event.marker_recorded_event_attributes.details.get("data")
        if data is not None and data.payloads:
            with contextlib.suppress(ValueError):
                return f"{name}({json.loads(data.payloads[0].data).get('activity_type')})"
    return name


async def test_cancels_racing_a_moves_hand_over_each_end_the_run_cancelled_undone_once_and_exported(
    harness: Harness,
) -> None:
    agent = f"cancel-move-{uuid.uuid4().hex[:8]}"
    v1, v2 = flow(agent, "1", "1h"), flow(agent, "2", "2h")
    await harness.dsmo.publish(v1)
    await harness.dsmo.publish(v2)
    gate = asyncio.Semaphore(AT_ONCE)

    async def one(index: int) -> tuple[str, str]:
        async with gate:
            # 0 to ~0.4 s: from before the move is decided to after the next generation began.
            run_id, answer = await race(harness, v1, v2, delay=index * 0.02)
            await ended_cancelled(harness, run_id)
            return run_id, answer

    answers = await asyncio.gather(*(one(index) for index in range(TRIES)))
    assert len(answers) == TRIES
