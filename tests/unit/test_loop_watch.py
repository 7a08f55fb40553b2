"""Async user code that blocks the event loop is named and counted; one declared blocking runs off the loop."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from dsmo.activities import maybe_async
from dsmo.activities.loop_watch import LoopWatch
from dsmo.activities.maybe_async import call_maybe_async

pytestmark = pytest.mark.asyncio


class Counter:
    def __init__(self, counts: list[dict[str, str]]) -> None:
        self.counts = counts

    def add(self, value: int, labels: dict[str, str]) -> None:
        self.counts.extend([labels] * value)


class Meter:
    """What the monitor uses of Temporal's MetricMeter: one counter, its additions kept."""

    def __init__(self) -> None:
        self.counts: list[dict[str, str]] = []

    def create_counter(self, name: str, description: str | None = None) -> Counter:
        assert name == "dsmo_event_loop_stalls"
        return Counter(self.counts)


async def blocks(document: Any, message: Any) -> Any:
    await asyncio.sleep(0)
    time.sleep(1.5)  # the mistake: a blocking call inside an async def
    return {}, {}


async def awaits(document: Any, message: Any) -> Any:
    await asyncio.sleep(0.01)
    return {}, {}


async def test_a_blocking_async_agent_is_named_and_counted(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    watch = LoopWatch(threshold=0.3)  # the block is five times the threshold: no race decides it
    monkeypatch.setattr(maybe_async, "loop_watch", watch)
    meter = Meter()
    reported = asyncio.Event()

    class Reported(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "sleepy" in record.getMessage():
                reported.set()

    handler = Reported(logging.WARNING)
    logging.getLogger("dsmo.worker.loop").addHandler(handler)
    monitor = asyncio.create_task(watch.monitor(meter, interval=0.01))  # type: ignore[arg-type]
    try:
        with ThreadPoolExecutor(1) as threads, caplog.at_level(logging.WARNING, logger="dsmo.worker.loop"):
            await asyncio.sleep(0.05)  # the monitor is sleeping when the agent blocks
            quiet = ("agent", "quiet", "run r-1, stage fine")
            assert await call_maybe_async(threads, awaits, {}, None, who=quiet) == ({}, {})
            who = ("agent", "sleepy", "run r-1, stage score")
            assert await call_maybe_async(threads, blocks, {}, None, who=who) == ({}, {})
            await asyncio.wait_for(reported.wait(), 10)  # a hang guard only
    finally:
        monitor.cancel()
        logging.getLogger("dsmo.worker.loop").removeHandler(handler)
    # (a loaded machine may add stalls of its own: only the agent's is asserted)
    [warning] = [record.getMessage() for record in caplog.records if "sleepy" in record.getMessage()]
    assert re.search(r"async agent sleepy \(run r-1, stage score\) held it for \d+\.\d s", warning)
    assert {"kind": "agent", "name": "sleepy"} in meter.counts


async def test_an_async_agent_declared_blocking_runs_off_the_loop() -> None:
    on_loop = threading.Event()

    async def waits_for_the_loop(document: Any, message: Any) -> Any:
        # Blocks its thread until the worker's loop has run something else: it would deadlock on the loop.
        return {"loop answered": on_loop.wait(10)}, {}

    async def loop_work() -> None:
        on_loop.set()

    with ThreadPoolExecutor(1) as threads:
        agent = asyncio.create_task(call_maybe_async(threads, waits_for_the_loop, {}, None, blocking=True))
        await asyncio.sleep(0)
        await loop_work()
        assert await agent == ({"loop answered": True}, {})


async def test_errors_and_cancellation_reach_the_watched_agent() -> None:
    watch = LoopWatch(threshold=10)
    cancelled = asyncio.Event()

    async def fails() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad document")

    async def waits() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(ValueError, match="bad document"):
        await watch.run(fails(), kind="agent", name="a", where="here")
    task = asyncio.create_task(watch.run(waits(), kind="agent", name="b", where="here"))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set() and watch.take_held() == []
