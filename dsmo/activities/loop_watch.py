"""Watching the worker's event loop: user code that blocks it is named in the log and counted.

Async agents and actions run on the worker's one event loop, beside every other activity, the
pollers and the workflow tasks' completions. One of them that blocks (``time.sleep``, a
synchronous HTTP call, a long computation) stalls all of those at once. Each step of user code on
the loop (from one ``await`` to the next) is timed, so the code that held the loop is known, and a
monitor task measures how late the loop wakes it: a stall above `STALL_SECONDS` is logged once,
naming what held the loop, and counted in ``dsmo_event_loop_stalls`` (by agent or action).
"""

from __future__ import annotations

import asyncio
import logging
import time
import types
from collections import deque
from collections.abc import Awaitable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from temporalio.common import MetricMeter

T = TypeVar("T")

# A loop that wakes this late, or one step of user code this long, is a stall worth a warning:
# far above what a healthy worker's loop lags under load, far below Temporal's own timeouts.
STALL_SECONDS = 1.0
SAMPLE_SECONDS = 0.1  # how often the monitor asks the loop to wake it
# Steps kept for the monitor's next report: bounded, as a process may run agents with no monitor.
HELD_KEPT = 64

log = logging.getLogger("dsmo.worker.loop")


@dataclass(frozen=True)
class Hold:
    """One step of user code that kept the loop at least `STALL_SECONDS`."""

    kind: str  # "agent" or "action"
    name: str
    where: str  # the run and stage (or step) it ran for
    seconds: float


class LoopWatch:
    """Times user code's steps on the loop and reports stalls (one per worker process)."""

    def __init__(self, threshold: float = STALL_SECONDS) -> None:
        self.threshold = threshold
        self._held: deque[Hold] = deque(maxlen=HELD_KEPT)

    async def run(self, awaitable: Awaitable[T], *, kind: str, name: str, where: str) -> T:
        """Await ``awaitable`` (an agent's or action's coroutine), timing each of its steps."""
        return await _stepped(awaitable, self, kind, name, where)

    def note(self, hold: Hold) -> None:
        """Remember a step that held the loop, for the monitor's next report."""
        self._held.append(hold)

    def take_held(self) -> list[Hold]:
        """The steps that held the loop since the last call."""
        held = list(self._held)
        self._held.clear()
        return held

    async def monitor(self, meter: MetricMeter, *, interval: float = SAMPLE_SECONDS) -> None:
        """Sleep ``interval`` again and again; a wake-up late by the threshold or more is a stall.

        Runs until cancelled. Each stall is one warning naming what held the loop (or saying that
        no agent or action did) and one count of ``dsmo_event_loop_stalls`` per name.
        """
        stalls = meter.create_counter("dsmo_event_loop_stalls", "times user code blocked the worker's event loop")
        while True:
            asked = time.monotonic()
            await asyncio.sleep(interval)
            late = time.monotonic() - asked - interval
            if late < self.threshold:
                continue
            held = self.take_held()
            for hold in held:
                log.warning(
                    "the worker's event loop was blocked for %.1f s: async %s %s (%s) held it for %.1f s "
                    "without awaiting; every run on this worker waited (see docs/plugins.md, blocking agents)",
                    late,
                    hold.kind,
                    hold.name,
                    hold.where,
                    hold.seconds,
                )
                stalls.add(1, {"kind": hold.kind, "name": hold.name})
            if not held:
                log.warning("the worker's event loop was blocked for %.1f s, by no async agent or action", late)
                stalls.add(1, {"kind": "other", "name": ""})


@types.coroutine
def _stepped(awaitable: Awaitable[T], watch: LoopWatch, kind: str, name: str, where: str) -> Generator[Any, Any, T]:
    """Drive ``awaitable`` as `await` would, timing each step between two of its suspensions."""
    steps = awaitable.__await__()
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        started = time.monotonic()
        try:
            if thrown is not None:
                error, thrown = thrown, None
                suspended = steps.throw(error)
            else:
                suspended = steps.send(sent)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        finally:
            held = time.monotonic() - started
            if held >= watch.threshold:
                watch.note(Hold(kind, name, where, held))
        try:
            sent = yield suspended
        except BaseException as err:  # noqa: BLE001 - cancellation and errors go on to the awaited code
            thrown = err
