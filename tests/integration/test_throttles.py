"""Throttles: starts of a definition, and runs of a stage, kept to a rate per key value, waiting
(never failing) for their turn; the rate holds within 10% over a minute of the time-skipping server."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.messaging import FileChannel
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.starter.client.definition_files import parse_definition_text
from dsmo.starter.client.dsmo_client import DsmoClient
from dsmo.starter.config.settings import Settings
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.model import AgentDefinition
from tests.conftest import Harness, start_time_skipping

pytestmark = pytest.mark.asyncio

TICKS = """
agent: {agent}
inputs: [customer]
{throttle}
start: hello
nodes:
  hello:
    actionType: send_message
    parameters: {{message: "hola {{{{customer}}}}"}}
    transitions: [{{to: bye}}]
  bye:
    actionType: send_message
    parameters: {{message: "bye"}}
"""


def _ticks(throttle: str) -> AgentDefinition:
    return parse_definition_text(TICKS.format(agent=f"tick-{uuid.uuid4().hex[:8]}", throttle=throttle))


async def test_starts_keep_to_the_rate_within_ten_percent_over_a_minute(
    stack_settings: Settings, store: ArtifactStore, tmp_path: Path
) -> None:
    definition = _ticks("throttle: {limit: 60, period: 1m}")
    queue = f"tick-{uuid.uuid4().hex[:8]}"
    env = await start_time_skipping()
    try:
        dsmo = DsmoClient(env.client, stack_settings)
        async with build_worker(env.client, task_queue=queue, store=store, channel=FileChannel(tmp_path / "outbox")):
            run_ids = [await dsmo.start(definition, {"customer": "c"}, task_queue=queue) for _ in range(121)]
            await env.sleep(timedelta(minutes=3))
            passed = []
            for run_id in run_ids:
                assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
                passed.append(next(e.at for e in await dsmo.events(run_id) if e.type == "TRANSITION"))
    finally:
        await env.shutdown()
    passed.sort()
    # 120 turns after the first: two minutes at 60 a minute, by the server's own clock.
    span = (passed[-1] - passed[0]).total_seconds()
    assert 120 * 0.9 <= span <= 120 * 1.1, span
    busiest = max(sum(1 for at in passed if start <= at < start + timedelta(minutes=1)) for start in passed)
    assert busiest <= 66, busiest  # no minute held more than the rate, and 10%


async def test_a_throttled_start_waits_pending_and_says_why(harness: Harness) -> None:
    dsmo, definition = harness.dsmo, _ticks('throttle: {key: "{{customer}}", limit: 1, period: 1h}')
    first = await harness.start(definition, {"customer": "ana"})
    assert (await dsmo.result(first)).status is RunStatus.COMPLETED
    held = await harness.start(definition, {"customer": "ana"})  # the hour's one start is spent
    other = await harness.start(definition, {"customer": "luis"})  # another key has its own
    assert (await dsmo.result(other)).status is RunStatus.COMPLETED
    view = await dsmo.status(held)
    assert view.status is RunStatus.PENDING
    assert view.pending_reason == "throttled: key ana allows 1 starts per 1h"
    await dsmo.cancel(held, reason="done")


TICKING = ProcessorRegistry()


@TICKING.register("tick-agent", "1.0.0")
def _tick(document: Any, message: StageMessage) -> ProcessorOutput:
    return ProcessorOutput(document={"ok": True}, summary={"ok": True})


@pytest.fixture
def registry() -> ProcessorRegistry:
    return TICKING


STAGED = """
agent: {agent}
inputs: [provider]
start: ask
nodes:
  ask:
    actionType: run_agent
    agent: tick-agent
    throttle: {{key: "{{{{provider}}}}", limit: 1, period: 1h}}
"""


async def test_a_throttled_stage_waits_running_and_says_why(harness: Harness) -> None:
    dsmo = harness.dsmo
    definition = parse_definition_text(STAGED.format(agent=f"stage-{uuid.uuid4().hex[:8]}"))
    first = await harness.start(definition, {"provider": "acme-llm"})
    assert (await dsmo.result(first)).status is RunStatus.COMPLETED
    held = await harness.start(definition, {"provider": "acme-llm"})
    for _ in range(600):  # a hang guard: until the run waits for its stage's turn
        view = await dsmo.status(held)
        if view.throttled:
            break
        await asyncio.sleep(0.1)
    assert view.status is RunStatus.RUNNING
    assert view.throttled == "stage ask throttled: key acme-llm allows 1 runs per 1h"
    await dsmo.cancel(held, reason="done")
