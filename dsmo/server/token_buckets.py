"""Token buckets by name: how many events one calling system may deliver per second, how many
wrong keys one address may try at the console's sign-in."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Bucket:
    tokens: float
    refilled_at: float


# Names kept at most before full buckets (as good as new) are forgotten: many callers, or many
# addresses at the sign-in, cannot grow the table without bound.
KEPT_NAMES = 50_000


class TokenBuckets:
    """One bucket per name, refilled at ``rate`` tokens a second up to ``burst``.

    Args:
        rate: Tokens added per second.
        burst: The bucket's size: how many calls may come at once after a quiet spell.
        clock: A monotonic clock in seconds (tests pass their own).
    """

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: dict[str, _Bucket] = {}

    def waiting(self, name: str) -> float:
        """Seconds until ``name`` may go ahead (0.0 now), without taking a token."""
        bucket = self._buckets.get(name)
        if bucket is None:
            return 0.0
        tokens = min(float(self.burst), bucket.tokens + (self.clock() - bucket.refilled_at) * self.rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def take(self, name: str, count: int = 1) -> float:
        """Take ``count`` tokens for ``name``, all or none.

        ``count`` larger than the burst goes ahead once the bucket is full and leaves it in debt
        (below zero): the calls are counted all the same, and the next waits until they are paid
        for. Otherwise no single batch could ever go through, nor could one slip past the rate.

        Args:
            name: Whose bucket (a key's name, an address).
            count: How many calls at once (a start with its events); at least 1.

        Returns:
            0.0 if the calls may go ahead, else the seconds until enough tokens are available.
        """
        now = self.clock()
        if name not in self._buckets and len(self._buckets) >= KEPT_NAMES:
            self._forget_full(now)
        bucket = self._buckets.setdefault(name, _Bucket(tokens=float(self.burst), refilled_at=now))
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.refilled_at) * self.rate)
        bucket.refilled_at = now
        needed = float(min(count, self.burst))
        if bucket.tokens >= needed:
            bucket.tokens -= count
            return 0.0
        return (needed - bucket.tokens) / self.rate

    def _forget_full(self, now: float) -> None:
        full = [
            name
            for name, bucket in self._buckets.items()
            if bucket.tokens + (now - bucket.refilled_at) * self.rate >= self.burst
        ]
        for name in full:
            del self._buckets[name]
