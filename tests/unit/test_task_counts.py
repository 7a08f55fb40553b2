"""The task list's totals: reused while fresh, counted once when asked at once, forgotten on change."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import cast

import pytest
from fastapi import Request

from dsmo.client.task_counts import TaskCounts
from dsmo.server.console.form_actions import changed_run


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Visibility:
    """Counts how often it was asked; answers the current number of runs, optionally after a gate."""

    def __init__(self) -> None:
        self.runs = 7
        self.asked = 0
        self.gate: asyncio.Event | None = None
        self.fail: Exception | None = None

    async def count(self) -> int:
        self.asked += 1
        answer = self.runs
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return answer


async def test_a_total_is_reused_while_fresh_and_counted_again_after() -> None:
    clock, visibility = Clock(), Visibility()
    counts = TaskCounts(fresh_for=5.0, clock=clock)
    assert await counts.total("q", visibility.count) == 7
    visibility.runs = 9
    clock.now += 4.9
    assert await counts.total("q", visibility.count) == 7
    assert await counts.total("other", visibility.count) == 9  # each query its own total
    clock.now += 0.2
    assert await counts.total("q", visibility.count) == 9
    assert visibility.asked == 3


async def test_page_loads_at_once_share_one_count() -> None:
    visibility = Visibility()
    visibility.gate = asyncio.Event()
    counts = TaskCounts(clock=Clock())
    waiting = [asyncio.create_task(counts.total("q", visibility.count)) for _ in range(5)]
    await asyncio.sleep(0)
    visibility.gate.set()
    assert await asyncio.gather(*waiting) == [7] * 5
    assert visibility.asked == 1


async def test_a_caller_giving_up_does_not_cancel_the_others_count() -> None:
    visibility = Visibility()
    visibility.gate = asyncio.Event()
    counts = TaskCounts(clock=Clock())
    leaving = asyncio.create_task(counts.total("q", visibility.count))
    staying = asyncio.create_task(counts.total("q", visibility.count))
    await asyncio.sleep(0)
    leaving.cancel()
    visibility.gate.set()
    assert await staying == 7
    assert leaving.cancelled()


async def test_a_failed_count_reaches_every_caller_and_is_not_kept() -> None:
    visibility = Visibility()
    visibility.gate = asyncio.Event()
    visibility.fail = RuntimeError("visibility unavailable")
    counts = TaskCounts(clock=Clock())
    both = [asyncio.create_task(counts.total("q", visibility.count)) for _ in range(2)]
    await asyncio.sleep(0)
    visibility.gate.set()
    for caller in both:
        with pytest.raises(RuntimeError, match="unavailable"):
            await caller
    visibility.fail, visibility.gate = None, None
    assert await counts.total("q", visibility.count) == 7
    assert visibility.asked == 2


async def test_forget_counts_afresh_and_keeps_nothing_until_visibility_has_caught_up() -> None:
    clock, visibility = Clock(), Visibility()
    counts = TaskCounts(fresh_for=5.0, clock=clock)
    assert await counts.total("q", visibility.count) == 7
    visibility.runs = 6
    counts.forget()
    assert await counts.total("q", visibility.count) == 6
    visibility.runs = 5
    clock.now += 4.9  # within 5 s of the change: counted on every load, nothing kept
    assert await counts.total("q", visibility.count) == 5
    clock.now += 0.2
    assert await counts.total("q", visibility.count) == 5  # counted and kept now
    visibility.runs = 4
    assert await counts.total("q", visibility.count) == 5
    assert visibility.asked == 4


async def test_a_count_begun_before_forget_is_not_kept_even_if_it_ends_last() -> None:
    clock = Clock()
    counts = TaskCounts(fresh_for=5.0, clock=clock)
    older, newer = asyncio.Event(), asyncio.Event()

    async def gated(gate: asyncio.Event, answer: int) -> int:
        await gate.wait()
        return answer

    before = asyncio.create_task(counts.total("q", lambda: gated(older, 6)))
    await asyncio.sleep(0)
    counts.forget()
    clock.now += 10  # past the settling time: a count begun now is kept
    after = asyncio.create_task(counts.total("q", lambda: gated(newer, 5)))  # does not join the older count
    await asyncio.sleep(0)
    newer.set()
    assert await after == 5
    older.set()
    assert await before == 6
    assert await counts.total("q", lambda: gated(asyncio.Event(), 0)) == 5  # the later count is the one kept


async def test_only_the_most_recent_queries_are_kept() -> None:
    visibility = Visibility()
    counts = TaskCounts(kept=2, clock=Clock())
    for query in ("a", "b", "c"):
        await counts.total(query, visibility.count)
    await counts.total("c", visibility.count)
    await counts.total("b", visibility.count)
    assert visibility.asked == 3
    await counts.total("a", visibility.count)  # dropped as the oldest
    assert visibility.asked == 4


async def test_a_form_that_changes_a_run_makes_the_task_list_count_again() -> None:
    visibility = Visibility()
    counts = TaskCounts(clock=Clock())
    await counts.total("q", visibility.count)
    state = SimpleNamespace(console=SimpleNamespace(task_counts=counts))
    answer = changed_run(cast(Request, SimpleNamespace(app=SimpleNamespace(state=state))), "run 1", "cancelled")
    assert answer.status_code == 303 and answer.headers["location"] == "/console/runs/run%201?notice=cancelled"
    await counts.total("q", visibility.count)
    assert visibility.asked == 2
