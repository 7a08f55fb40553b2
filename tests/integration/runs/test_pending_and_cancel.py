"""PENDING is visible (start delay, per-agent rate limit) and CANCELLED is reachable from every live state."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness
from tests.polling import until

pytestmark = pytest.mark.integration


def waiter(agent: str = "pending-test", **extra: object) -> AgentDefinition:
    return parse_definition(
        {
            "agent": agent,
            "start": "wait",
            "nodes": {
                "wait": {"actionType": "wait_for_response", "next": "bye"},
                "bye": {"actionType": "send_message", "parameters": {"message": "bye {{lastResponse}}"}},
            },
            **extra,
        }
    )


async def attribute(harness: Harness, run_id: str) -> str | None:
    described = await harness.dsmo.temporal.get_workflow_handle(run_id).describe()
    return described.typed_search_attributes.get(sa.AGENT_EXECUTION_STATUS)


async def test_start_delay_shows_pending_and_can_be_cancelled(harness: Harness) -> None:
    """Seed: PENDING -> CANCELLED (cancelled before it starts)."""
    run_id = await harness.start(waiter(), start_delay=timedelta(hours=1))
    view = await harness.dsmo.status(run_id)
    assert view.status is RunStatus.PENDING and "scheduled to start at" in (view.pending_reason or "")
    assert await attribute(harness, run_id) == "pending"
    await harness.dsmo.cancel(run_id, reason="no longer needed", by="ops")
    result = await harness.dsmo.result(run_id)
    assert (result.status, result.result_type, result.cancelled_by, result.cancel_reason) == (
        RunStatus.CANCELLED,
        "cancelled",
        "ops",
        "no longer needed",
    )
    events = [e.type for e in await harness.dsmo.events(run_id)]
    assert events == ["RUN_CREATED", "RUN_ABORTED"]
    assert await attribute(harness, run_id) == "cancelled"


async def test_cancel_a_waiting_run(harness: Harness) -> None:
    """Seed: WAITING -> CANCELLED, with the CANCELLED record (cancelledBy, cancelReason)."""
    run_id = await harness.start(waiter())
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await harness.dsmo.cancel(run_id, reason="Usuario solicito cancelacion")
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.CANCELLED and result.cancelled_by == "user"
    view = await harness.dsmo.status(run_id)
    assert (view.status, view.cancelled_by, view.cancel_reason, view.waiting_for) == (
        RunStatus.CANCELLED,
        "user",
        "Usuario solicito cancelacion",
        None,
    )
    described = await harness.dsmo.temporal.get_workflow_handle(run_id).describe()
    assert described.status is not None and described.status.name == "CANCELED"
    with pytest.raises(Exception, match="already ended"):
        await harness.dsmo.cancel(run_id, reason="twice")


async def test_cancel_from_temporal_itself_is_recorded_as_system(harness: Harness) -> None:
    run_id = await harness.start(waiter())
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await harness.dsmo.temporal.get_workflow_handle(run_id).cancel()  # e.g. the Web UI's button
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.CANCELLED and result.cancelled_by == "system"


async def test_rate_limit_queues_runs_in_pending(harness: Harness) -> None:
    """Seed: PENDING while waiting its turn (rate limiting); PENDING -> RUNNING when admitted."""
    definition = waiter("limited-agent-" + harness.task_queue[-6:], rateLimit={"maxConcurrent": 1})
    first = await harness.start(definition)
    await harness.dsmo.wait_for_status(first, {RunStatus.WAITING})
    second = await harness.start(definition)
    third = await harness.start(definition)
    for queued in (second, third):
        # Each is PENDING from its start; it says why once its first workflow task has asked for a
        # slot (the first run holds the only one until it ends, so neither can be admitted).
        async def queued_behind_the_limit(run_id: str = queued) -> bool:
            view = await harness.dsmo.status(run_id)
            assert view.status is RunStatus.PENDING, view
            reason = "allows 1 concurrent runs" in (view.pending_reason or "")
            return reason and await attribute(harness, run_id) == "pending"

        await until(queued_behind_the_limit, f"{queued} queued behind the rate limit")

    # A queued run can be cancelled; it leaves the queue.
    await harness.dsmo.cancel(second, reason="changed my mind")
    assert (await harness.dsmo.result(second)).status is RunStatus.CANCELLED

    # When the first ends, the third is admitted.
    await harness.dsmo.respond(first, "done")
    assert (await harness.dsmo.result(first)).status is RunStatus.COMPLETED
    view = await harness.dsmo.wait_for_status(third, {RunStatus.WAITING}, timeout=30)
    assert view.waiting_for == "response"
    await harness.dsmo.respond(third, "done too")
    assert (await harness.dsmo.result(third)).status is RunStatus.COMPLETED


SLOW = ProcessorRegistry()
# The slow stage runs until the test lets it go (after it has cancelled the run).
RELEASE = threading.Event()


@SLOW.register("slow-stage", "1.0.0")
def _slow_stage(document: object, message: StageMessage) -> ProcessorOutput:
    RELEASE.wait(120)  # a hang guard only
    return ProcessorOutput(document={}, summary={})


@pytest.fixture
def registry() -> ProcessorRegistry:
    return SLOW


async def test_cancel_a_running_run(harness: Harness) -> None:
    """Seed: RUNNING -> CANCELLED (cancelled while an action is under way)."""
    definition = parse_definition(
        {"agent": "slow", "start": "work", "nodes": {"work": {"actionType": "run_agent", "agent": "slow-stage"}}}
    )
    RELEASE.clear()
    run_id = await harness.start(definition)
    try:
        # The stage cannot finish before it is released: the run is RUNNING at `work` when cancelled.
        async def at_work() -> bool:
            view = await harness.dsmo.status(run_id)
            assert not view.status.terminal, view
            return view.status is RunStatus.RUNNING and view.current_node == "work"

        await until(at_work, "the run reaching its slow stage")
        await harness.dsmo.cancel(run_id, reason="taking too long", by="ops")
    finally:
        RELEASE.set()
    result = await harness.dsmo.result(run_id)
    assert (result.status, result.cancelled_by, result.failed_action_id) == (RunStatus.CANCELLED, "ops", "work")
    assert [e.type for e in await harness.dsmo.events(run_id)][-1] == "RUN_ABORTED"
