"""A throttle above one a second on the real server, whose timers fire up to a second late: every
queued ask is granted, and no grant, by the bucket's own history, comes before its token is due."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.worker import Worker

from dsmo.client.dsmo_client import DsmoClient
from dsmo.workflows.common.sandbox import sandbox_runner
from dsmo.workflows.flow.throttle_bucket import BucketState, KeyThrottle
from tests.throttle_waiters import ThrottleWaiter

pytestmark = pytest.mark.asyncio
INITIATED = EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED
TASK_STARTED = EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED


async def _grants(dsmo: DsmoClient, *, limit: int, period: float, burst: int, asks: int) -> list[datetime]:
    """When the bucket granted each of ``asks`` tokens, by the bucket's own clock: the start of the
    workflow task that granted it (`workflow.now()` there), read from its history. The time a grant
    is recorded instead would depend on how long the task took, which depends on the machine."""
    queue = f"rate-{uuid.uuid4().hex[:8]}"
    workflows = [KeyThrottle, ThrottleWaiter]
    async with Worker(dsmo.temporal, task_queue=queue, workflows=workflows, workflow_runner=sandbox_runner()):
        state = BucketState(owner="rate", key="k", limit=limit, period_seconds=period, burst=burst)
        handle = await dsmo.temporal.start_workflow(
            KeyThrottle.run, state, id=f"dsmo-throttle.{queue}", task_queue=queue
        )
        ask = {"limit": limit, "period_seconds": period, "burst": burst}
        for index in range(asks):  # runs that wait for their token (an ended run's turn goes to the next)
            waiter = await dsmo.temporal.start_workflow(ThrottleWaiter.run, id=f"{queue}-{index}", task_queue=queue)
            await handle.signal("ask", {**ask, "run_id": waiter.id})
        deadline = time.monotonic() + 120  # a hang guard; the old bucket needed ~60 s for these
        while (await handle.query(KeyThrottle.snapshot)).queue:
            assert time.monotonic() < deadline, "the bucket never granted every ask"
            await asyncio.sleep(0.2)
        history = await handle.fetch_history()
        await handle.terminate("measured")
        for index in range(asks):  # each ended once it was granted: none is left running
            assert (await dsmo.temporal.get_workflow_handle(f"{queue}-{index}").result()) is None
    granted, task_started = [], None
    for event in history.events:
        if event.event_type == TASK_STARTED:
            task_started = event.event_time.ToDatetime()
        elif event.event_type == INITIATED and task_started is not None:
            granted.append(task_started)
    return sorted(granted)


@pytest.mark.parametrize(("limit", "burst"), [(500, 1), (600, 5)])
async def test_a_fast_throttle_grants_at_its_rate(dsmo: DsmoClient, limit: int, burst: int) -> None:
    rate = limit / 60.0
    granted = await _grants(dsmo, limit=limit, period=60.0, burst=burst, asks=60)
    assert len(granted) == 60
    first = granted[0]
    since = [(at - first).total_seconds() for at in granted]
    # Never ahead of the bucket: the k-th grant comes no sooner than (k + 1 - burst) / rate.
    early = [(k, s) for k, s in enumerate(since) if s < (k + 1 - burst) / rate - 0.001]
    assert not early, early
    # How far behind it the grants come depends on when the server fires timers: the rate
    # achieved (8.28/s of 8.33 asked, 2.57/s before owed tokens) is measured, not asserted here.
