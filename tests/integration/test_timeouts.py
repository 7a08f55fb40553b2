"""Wait timeouts at the seed's real durations (24 h, 7 d) on Temporal's time-skipping server."""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from activities.artifacts import ArtifactStore
from activities.messaging import FileChannel
from starter.client import DsmoClient
from starter.settings import Settings
from starter.stack_checks import ensure_search_attributes_on
from tests.conftest import Harness
from worker import build_worker
from workflows.definition import AgentDefinition, parse_definition
from workflows.status import RunStatus

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture(scope="session")
async def time_env() -> AsyncIterator[WorkflowEnvironment]:
    binary = str(Path(sys.executable).parent / "temporal-test-server")
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=binary if Path(binary).exists() else shutil.which("temporal-test-server"),
    )
    await ensure_search_attributes_on(env.client)
    try:
        yield env
    finally:
        await env.shutdown()


@pytest_asyncio.fixture
async def skipping(
    time_env: WorkflowEnvironment, store: ArtifactStore, stack_settings: Settings, tmp_path: Path
) -> AsyncIterator[Harness]:
    task_queue = f"skip-{uuid.uuid4().hex[:10]}"
    outbox = tmp_path / "outbox"
    async with build_worker(time_env.client, task_queue=task_queue, store=store, channel=FileChannel(outbox)):
        yield Harness(DsmoClient(time_env.client, stack_settings), store, task_queue, outbox, stack_settings)


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
    """How long each wait lasted in the run's (virtual) time, to the second."""
    starts = [e.at for e in events if e.type == "RUN_WAITING"]
    ends = [e.at for e in events if e.type in ("RUN_RESUMED", "RUN_ABORTED")]
    return [timedelta(seconds=round((end - start).total_seconds())) for start, end in zip(starts, ends, strict=False)]


async def finish(harness: Harness, env: WorkflowEnvironment, run_id: str, advance: timedelta) -> Any:
    """Advance the server's clock by ``advance`` once the run waits, then return its record."""
    # Handles fetched by id do not skip time on their own (only start_workflow's do), so the
    # test moves the clock explicitly: the waits below really last 24 h or 7 d of server time.
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await env.sleep(advance)
    return await harness.dsmo.result(run_id)


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
    run_id = await skipping.start(waiting_definition(timeout="24h", onTimeout="retry", maxRetries=2))
    result = await finish(skipping, time_env, run_id, timedelta(hours=73))
    assert result.status is RunStatus.TIMEOUT
    assert waited(await skipping.dsmo.events(run_id)) == [timedelta(hours=24)] * 3


async def test_reply_before_the_timeout_wins(skipping: Harness, time_env: WorkflowEnvironment) -> None:
    run_id = await skipping.start(waiting_definition(timeout="24h", onTimeout="fail"))
    await skipping.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await time_env.sleep(timedelta(hours=23))
    await skipping.dsmo.respond(run_id, "just in time", event_id="late-but-ok")
    result = await skipping.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert [m["message"] for m in skipping.messages(run_id)] == ["after: just in time"]
