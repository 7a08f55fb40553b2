"""Heartbeats for an activity that waits on something slow (a model's answer, a tool's action):
while the body runs, the activity tells Temporal it is alive every `HEARTBEAT_EVERY` seconds.

The workflow schedules such activities with a heartbeat timeout (`LIVENESS_TIMEOUT`), so a worker
that dies mid-call is noticed within seconds and the call retried elsewhere, instead of after the
node's whole timeout. The beats run on the event loop, beside the body (an action on the
threads, a model call awaited on the loop).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from temporalio import activity

HEARTBEAT_EVERY = 2.0  # seconds; well inside the workflow's 10-second heartbeat timeout


@contextlib.asynccontextmanager
async def heartbeating(every: float = HEARTBEAT_EVERY) -> AsyncIterator[None]:
    """Heartbeat the current activity while the body runs (nothing outside an activity)."""
    if not activity.in_activity():
        yield
        return

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every)

    beating = asyncio.create_task(beat())
    try:
        yield
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating
