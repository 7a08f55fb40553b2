"""Task-list totals, counted once per query and reused for a few seconds.

Visibility counts every matching run to answer a count, so its cost grows with the number of
runs waiting (about 0.4 s with 100,000 waiting on the dev server's SQLite), while the page of
25 rows beside it does not. A total that is a few seconds old is as good to a person as a fresh
one (visibility itself lags the runs), so the console keeps each query's total for `FRESH_FOR`
seconds, lets concurrent page loads share one count in flight, and forgets every total when a
person delivers an event from the console (their own action should show at once).
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
            # Read a failure nobody waits for any more (its callers were cancelled) so it is not logged.
            counting.add_done_callback(lambda done: done.cancelled() or done.exception())
            self._counting[key] = counting
        # Shielded: one caller giving up (a closed browser tab) does not cancel the others' count.
        return await asyncio.shield(counting)

    def forget(self) -> None:
        """Drop every kept total, so the next page load counts again."""
        self._totals.clear()
        self._generation += 1

    async def _count(self, key: tuple[int, str], count: Callable[[], Awaitable[int]]) -> int:
        generation, query = key
        try:
            total = await count()
        finally:
            del self._counting[key]
        if generation == self._generation:  # a count begun before `forget` may miss what changed since
            self._keep(query, total)
        return total

    def _keep(self, query: str, total: int) -> None:
        self._totals[query] = _Counted(total, self._clock())
        self._totals.move_to_end(query)
        while len(self._totals) > self._kept:
            self._totals.popitem(last=False)
