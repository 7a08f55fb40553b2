"""Throttles: starts of a definition, and runs of a stage, kept to a rate per key value, waiting
(never failing) for their turn; the rate holds within 10% over a minute of the time-skipping server."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.worker import Worker

from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.client.definition_files import parse_definition_text
from dsmo.workflows.common.sandbox import sandbox_runner
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.flow.throttle_bucket import BucketState, KeyThrottle
from tests.conftest import Harness, start_time_skipping
from tests.polling import until_value
from tests.throttle_waiters import ThrottleWaiter

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


async def _bucket_history(asks: list[tuple[str, bool]], *, limit: int, skip: timedelta) -> list[tuple[str, datetime]]:
    """A bucket allowing ``limit`` a minute asked by each (run, whether it waits or has ended) at
    once: to whom it sent a grant, and when by the time-skipping server's clock, over ``skip``."""
    queue = f"bucket-{uuid.uuid4().hex[:8]}"
    env = await start_time_skipping()
    workflows = [KeyThrottle, ThrottleWaiter]
    try:
        async with Worker(env.client, task_queue=queue, workflows=workflows, workflow_runner=sandbox_runner()):
            state = BucketState(owner="tick", key="c", limit=limit, period_seconds=60.0)
            handle = await env.client.start_workflow(
                KeyThrottle.run, state, id=f"dsmo-throttle.{queue}", task_queue=queue
            )
            for run_id, waits in asks:  # else a run that does not exist: its grant fails, as for an ended run
                if waits:
                    waiter = await env.client.start_workflow(ThrottleWaiter.run, True, id=run_id, task_queue=queue)
                    await waiter.query(ThrottleWaiter.granted)  # it has begun: a grant finds it waiting
            for run_id, _ in asks:
                await handle.signal("ask", {"run_id": run_id, "limit": limit, "period_seconds": 60.0})
            for _ in range(int(skip / timedelta(seconds=5))):  # a few seconds of the server's time at a time
                await env.sleep(timedelta(seconds=5))
            history = await handle.fetch_history()
    finally:
        await env.shutdown()
    initiated = EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED
    return sorted(
        (
            (event.signal_external_workflow_execution_initiated_event_attributes.workflow_execution.workflow_id),
            event.event_time.ToDatetime(),
        )
        for event in history.events
        if event.event_type == initiated
    )


async def test_a_bucket_hands_out_tokens_at_its_rate_within_ten_percent() -> None:
    """121 runs ask at once of a bucket allowing 60 a minute: the grants, read from the bucket's
    own history by the time-skipping server's clock, spread over two minutes."""
    grants = await _bucket_history([(f"waiter-{index:03d}", True) for index in range(121)], limit=60, skip=SKIP)
    granted = sorted(at for _, at in grants)
    assert len(granted) == 121
    # 120 turns after the first: two minutes at 60 a minute.
    span = (granted[-1] - granted[0]).total_seconds()
    assert 120 * 0.9 <= span <= 120 * 1.1, span
    busiest = max(sum(1 for at in granted if start <= at < start + timedelta(minutes=1)) for start in granted)
    assert busiest <= 66, busiest  # no minute held more than the rate, and 10%


SKIP = timedelta(minutes=3)


async def test_the_turn_of_a_run_that_ended_while_it_waited_goes_to_the_next_in_line() -> None:
    # One a minute: the first runs at once, the second has ended by its turn (cancelled while it
    # waited), and the third takes that turn instead of waiting a minute more.
    grants = dict(await _bucket_history([("a-first", True), ("b-ended", False), ("c-third", True)], limit=1, skip=SKIP))
    assert set(grants) == {"a-first", "b-ended", "c-third"}
    assert (grants["b-ended"] - grants["a-first"]).total_seconds() >= 59
    assert (grants["c-third"] - grants["b-ended"]).total_seconds() < 5, grants


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
    view = await until_value(lambda: dsmo.status(held), lambda view: bool(view.throttled), "the run waits its turn")
    assert view.status is RunStatus.RUNNING
    assert view.throttled == "stage ask throttled: key acme-llm allows 1 runs per 1h"
    await dsmo.cancel(held, reason="done")
