"""Task-list totals, counted once per query and reused for a few seconds.

Visibility counts every matching run to answer a count, so its cost grows with the number of
runs waiting (0.43 s at the median with 100,000 waiting on the dev server's SQLite), while the page of
25 rows beside it does not. A total that is a few seconds old is as good to a person as a fresh
one (visibility itself lags the runs), so the console keeps each query's total for `FRESH_FOR`
seconds and lets concurrent page loads share one count in flight. When a person changes a run
from the console (an event, a cancel, a rewind), every total is forgotten, and for `FRESH_FOR`
seconds after that totals are counted on every load and not kept: the run's search attributes
and visibility catch up a moment after the change, and a total counted before they did must not
be shown for 5 seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

FRESH_FOR = 5.0
# Distinct filter combinations kept; the oldest is dropped first.
KEPT = 256


@dataclass(frozen=True)
class _Counted:
    total: int
    at: float


class TaskCounts:
    """Totals per visibility query, each reused until it is `fresh_for` seconds old."""

    def __init__(
        self, *, fresh_for: float = FRESH_FOR, kept: int = KEPT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._fresh_for = fresh_for
        self._kept = kept
        self._clock = clock
        self._totals: OrderedDict[str, _Counted] = OrderedDict()
        self._counting: dict[tuple[int, str], asyncio.Future[int]] = {}
        self._generation = 0
        self._forgotten_at: float | None = None

    async def total(self, query: str, count: Callable[[], Awaitable[int]]) -> int:
        """The query's total: a recent one, the one being counted, or ``count()``'s answer.

        Args:
            query: The visibility query, the key of the total.
            count: Counts the query's runs when no recent total exists; its errors reach the caller.
        """
        known = self._totals.get(query)
        if known is not None and self._clock() - known.at < self._fresh_for:
            return known.total
        # Keyed by generation too: after `forget`, a page load never joins a count begun before it.
        key = (self._generation, query)
        counting = self._counting.get(key)
        if counting is None:
            counting = asyncio.ensure_future(self._count(key, count))
            self._counting[key] = counting
        # Shielded: one caller giving up (a closed browser tab) does not cancel the others' count.
        return await asyncio.shield(counting)

    def forget(self) -> None:
        """Drop every kept total; for `fresh_for` seconds, count on every load and keep nothing."""
        self._totals.clear()
        self._generation += 1
        self._forgotten_at = self._clock()

    async def _count(self, key: tuple[int, str], count: Callable[[], Awaitable[int]]) -> int:
        generation, query = key
        try:
            total = await count()
        finally:
            del self._counting[key]
        # A count begun before `forget`, or soon after it, may miss the change visibility has yet to show.
        settled = self._forgotten_at is None or self._clock() - self._forgotten_at >= self._fresh_for
        if generation == self._generation and settled:
            self._keep(query, total)
        return total

    def _keep(self, query: str, total: int) -> None:
        self._totals[query] = _Counted(total, self._clock())
        self._totals.move_to_end(query)
        while len(self._totals) > self._kept:
            self._totals.popitem(last=False)
