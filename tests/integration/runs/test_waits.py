"""Wait timeouts at the seed's real durations (24 h, 7 d) on Temporal's time-skipping server."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.definition_store import DefinitionStore
from dsmo.activities.messaging import FileChannel
from dsmo.client import redrive as dead_letters
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.slot_io import SlotRequest
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from dsmo.workflows.run.service_budgets import BUDGETS
from tests.conftest import Harness, skip_time, start_time_skipping

pytestmark = pytest.mark.integration


def waiting_definition(**parameters: Any) -> AgentDefinition:
    return parse_definition(
        {
            "agent": "wait-test",
            "start": "wait",
            "nodes": {
                "wait": {"actionType": "wait_for_response", "parameters": parameters, "next": "after"},
                "after": {
                    "actionType": "send_message",
                    "parameters": {"message": "after: {{lastResponse | default('none')}}"},
                },
            },
        }
    )


def waited(events: list[Any]) -> list[timedelta]:
    """How long each wait lasted in the run's (virtual) time, to the minute.

    The waits measured last hours or days; the time-skipping server may record the end of one a
    second late (the worker's activation is stamped when it runs), which is not what is tested.
    """
    starts = [e.at for e in events if e.type == "RUN_WAITING"]
    ends = [e.at for e in events if e.type in ("RUN_RESUMED", "RUN_ABORTED")]
    return [
        timedelta(minutes=round((end - start).total_seconds() / 60)) for start, end in zip(starts, ends, strict=False)
    ]


async def finish(harness: Harness, env: WorkflowEnvironment, run_id: str, advance: timedelta) -> Any:
    """Advance the server's clock by ``advance`` once the run waits, then return its record."""
    # Handles fetched by id do not skip time on their own (only start_workflow's do), so the
    # test moves the clock explicitly: the waits below really last 24 h or 7 d of server time.
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await env.sleep(advance - timedelta(minutes=1))
    # The last minute is skipped while the result is awaited: once a run has cancelled a child,
    # the test server's sleep call may never return, but the clock moves and the run ends.
    last_minute = asyncio.ensure_future(env.sleep(timedelta(minutes=1)))
    try:
        return await harness.dsmo.result(run_id)
    finally:
        last_minute.cancel()


async def test_response_default_24h_then_continue(
    skipping: Harness, time_env: WorkflowEnvironment, slice_definition: AgentDefinition
) -> None:
    """Seed: response waits 24 h by default; onTimeout continue runs timeoutActions and goes on."""
    run_id = await skipping.start(slice_definition, {"candidate": {"name": "Eva", "phone": "+1"}})
    result = await finish(skipping, time_env, run_id, timedelta(hours=24, minutes=1))
    assert result.status is RunStatus.COMPLETED
    assert "lastResponse" not in result.variables
    events = await skipping.dsmo.events(run_id)
    assert waited(events) == [timedelta(hours=24)]
    resumed = next(e for e in events if e.type == "RUN_RESUMED")
    assert resumed.data == {"eventType": "TIMEOUT", "attempt": 1, "onTimeout": "continue"}
    assert [m["message"] for m in skipping.messages(run_id)] == [
        "Hola Eva, ¿sigues interesado en la posición?",
        "No recibimos tu respuesta. Te contactaremos pronto.",
        "Gracias Eva, recibimos: (sin respuesta)",
    ]


async def test_response_maximum_7d_then_fail_is_terminal_timeout(
    skipping: Harness, time_env: WorkflowEnvironment
) -> None:
    """Seed: the response maximum is 7 days; onTimeout fail marks the run TIMEOUT."""
    run_id = await skipping.start(waiting_definition(timeout="7d", onTimeout="fail"))
    result = await finish(skipping, time_env, run_id, timedelta(days=7, minutes=1))
    assert result.status is RunStatus.TIMEOUT and result.result_type == "timeout"
    assert result.result_summary == "Timeout waiting for the user's response"
    assert result.failed_action_id == "wait"
    events = await skipping.dsmo.events(run_id)
    assert waited(events) == [timedelta(days=7)]
    assert events[-1].type == "RUN_ABORTED" and events[-1].data["status"] == "timeout"
    assert skipping.messages(run_id) == []  # the node after the wait never ran


async def test_retry_repeats_the_wait_then_times_out(skipping: Harness, time_env: WorkflowEnvironment) -> None:
    """Seed: onTimeout retry repeats the wait (WAITING -> RUNNING -> WAITING), bounded, then TIMEOUT."""
    run_id = await skipping.start(waiting_definition(timeout="24h", onTimeout="retry", maxRetries=2))
    result = await finish(skipping, time_env, run_id, timedelta(hours=73))
    assert result.status is RunStatus.TIMEOUT
    assert waited(await skipping.dsmo.events(run_id)) == [timedelta(hours=24)] * 3


async def test_reply_before_the_timeout_wins(skipping: Harness, time_env: WorkflowEnvironment) -> None:
    """Seed: WAITING -> RUNNING on resume, 23 h into a 24 h wait with onTimeout fail."""
    run_id = await skipping.start(waiting_definition(timeout="24h", onTimeout="fail"))
    await skipping.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await skip_time(time_env, timedelta(hours=23))
    await skipping.dsmo.respond(run_id, "just in time", event_id="late-but-ok")
    result = await skipping.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert [m["message"] for m in skipping.messages(run_id)] == ["after: just in time"]


def single_wait(action: str, parameters: dict[str, Any]) -> AgentDefinition:
    return parse_definition(
        {
            "agent": f"table-{action.replace('_', '-')}",
            "start": "wait",
            "nodes": {"wait": {"actionType": action, "parameters": parameters}},
        }
    )


KIND_PARAMS: dict[str, tuple[str, dict[str, Any]]] = {
    "document": ("request_document", {"documents": ["id_card"]}),
    "signature": ("request_signature", {"document": "https://example.com/c.pdf"}),
    "test": ("assign_test", {"test": "t-1"}),
    "event": ("wait_for_event", {"event": "cal-1"}),
}


@pytest.mark.parametrize("kind", sorted(KIND_PARAMS))
async def test_timeout_table_default_7d(skipping: Harness, time_env: WorkflowEnvironment, kind: str) -> None:
    """Seed's timeout table: document, signature and test wait 7 days by default (event: same, our choice)."""
    action, params = KIND_PARAMS[kind]
    run_id = await skipping.start(single_wait(action, {**params, "onTimeout": "fail"}))
    result = await finish(skipping, time_env, run_id, timedelta(days=7, minutes=1))
    assert result.status is RunStatus.TIMEOUT
    assert waited(await skipping.dsmo.events(run_id)) == [timedelta(days=7)]


@pytest.mark.parametrize("kind", sorted(KIND_PARAMS))
async def test_timeout_table_maximum_30d(skipping: Harness, time_env: WorkflowEnvironment, kind: str) -> None:
    """Seed's timeout table: the maximum for document, signature and test is 30 days."""
    action, params = KIND_PARAMS[kind]
    run_id = await skipping.start(single_wait(action, {**params, "timeout": "30d", "onTimeout": "continue"}))
    result = await finish(skipping, time_env, run_id, timedelta(days=30, minutes=1))
    assert result.status is RunStatus.COMPLETED
    assert waited(await skipping.dsmo.events(run_id)) == [timedelta(days=30)]


async def test_delay_maximum_30d(skipping: Harness, time_env: WorkflowEnvironment) -> None:
    """Seed's timeout table: a delay may last up to 30 days; SCHEDULE_REACHED resumes it."""
    run_id = await skipping.start(single_wait("delay", {"duration": "30d"}))
    result = await finish(skipping, time_env, run_id, timedelta(days=30, minutes=1))
    assert result.status is RunStatus.COMPLETED
    events = await skipping.dsmo.events(run_id)
    assert waited(events) == [timedelta(days=30)]
    assert [e.data.get("eventType") for e in events if e.type == "RUN_RESUMED"] == ["SCHEDULE_REACHED"]


async def test_delay_until_an_absolute_time(skipping: Harness, time_env: WorkflowEnvironment) -> None:
    run_id = await skipping.start(single_wait("delay", {"until": "{{when}}"}), {"when": "2099-01-01T00:00:00Z"})
    result = await skipping.dsmo.result(run_id)
    # Further than 30 days away: refused at the node, naming it.
    assert result.status is RunStatus.FAILED and "more than 30d away" in (result.error_message or "")


async def test_agent_default_1h_then_fail_cancels_the_child(
    skipping: Harness, time_env: WorkflowEnvironment, store: ArtifactStore
) -> None:
    """Seed's timeout table: a wait for a child agent lasts 1 hour by default."""
    child = parse_definition({"agent": "slow-child", "start": "w", "nodes": {"w": {"actionType": "wait_for_response"}}})
    DefinitionStore(store).publish(child)
    parent = single_wait("trigger_agent", {"agent": "slow-child", "onTimeout": "fail"})
    run_id = await skipping.start(parent)
    result = await finish(skipping, time_env, run_id, timedelta(hours=1, minutes=1))
    assert result.status is RunStatus.TIMEOUT and result.result_summary == "Timeout waiting for the child agent"
    assert waited(await skipping.dsmo.events(run_id)) == [timedelta(hours=1)]
    child_result = await skipping.dsmo.result(f"{run_id}.wait.1")
    assert child_result.status is RunStatus.CANCELLED


async def _result_on_time_skipping(dsmo: DsmoClient, run_id: str) -> Any:
    """`dsmo.result`, asked again when the time-skipping server's long poll for the run's close
    came back empty: the SDK then raises "No completion event found" (seen once on a loaded
    machine) although the run is still about to end."""
    for _ in range(5):
        try:
            return await dsmo.result(run_id)
        except RuntimeError as err:
            if "No completion event found" not in str(err):
                raise
    return await dsmo.result(run_id)


async def test_an_infrastructure_call_that_always_fails_ends_the_run_within_its_budget(
    store: ArtifactStore, stack_settings: Settings, tmp_path: Path
) -> None:
    """The limiter cannot be reached: after its 10 min budget the run fails, with a dead letter."""

    @activity.defn(name=contracts.REQUEST_SLOT)
    async def unreachable_limiter(request: SlotRequest) -> None:
        raise RuntimeError("limiter unreachable: connection refused")

    queue = f"budget-{uuid.uuid4().hex[:8]}"
    definition = parse_definition(
        {
            "agent": f"limited-{uuid.uuid4().hex[:6]}",
            "rateLimit": {"maxConcurrent": 1},
            "start": "hello",
            "nodes": {"hello": {"actionType": "send_message", "parameters": {"message": "hi"}}},
        }
    )
    budget = BUDGETS[contracts.REQUEST_SLOT]
    # A server of its own: the shared one's clock is moved by the other tests' runs.
    env = await start_time_skipping()
    try:
        dsmo = DsmoClient(env.client, stack_settings)
        async with build_worker(
            env.client, task_queue=queue, store=store, channel=FileChannel(tmp_path / "outbox"),
            overrides=[unreachable_limiter],
        ):  # fmt: skip
            run_id = (await dsmo.start(definition, {"who": "x"}, task_queue=queue)).run_id
            await env.sleep(budget.total + timedelta(minutes=1))
            result = await _result_on_time_skipping(dsmo, run_id)
            events = await dsmo.events(run_id)
    finally:
        await env.shutdown()
    assert result.status is RunStatus.FAILED and result.path == []
    assert "request_slot kept failing for 10m" in (result.error_message or "")
    assert "limiter unreachable" in (result.error_message or "")
    failed = next(e for e in events if e.type == "SERVICE_FAILED")
    assert failed.data["activity"] == "request_slot" and failed.data["budgetSpent"] is True
    created = next(e for e in events if e.type == "RUN_CREATED").at
    assert failed.at - created <= budget.total + budget.retry_policy.maximum_interval  # type: ignore[operator]
    lettered = next(e for e in events if e.type == "DEAD_LETTERED")
    assert lettered.stage == "hello"
    rows = [row for row in dead_letters.list_dead_letters(store) if row.run_id == run_id]
    assert [(row.stage, row.error_type) for row in rows] == [("hello", "ServiceBudgetSpent")]
    letter = dead_letters.read_dead_letter(store, f"{run_id}/hello")
    assert letter.service == "request_slot" and letter.variables["who"] == "x"
    assert [e.type for e in events][-1] == "RUN_ABORTED"
