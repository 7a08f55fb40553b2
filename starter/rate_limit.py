"""Per-key token buckets: how many events one calling system may deliver per second."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Bucket:
    tokens: float
    refilled_at: float


class TokenBuckets:
    """One bucket per key name, refilled at ``rate`` tokens a second up to ``burst``.

    Args:
        rate: Tokens added per second.
        burst: The bucket's size: how many calls may come at once after a quiet spell.
        clock: A monotonic clock in seconds (tests pass their own).
    """

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: dict[str, _Bucket] = {}

    def take(self, name: str) -> float:
        """Take one token for ``name``.

        Returns:
            0.0 if the call may go ahead, else the seconds until a token is available.
        """
        now = self.clock()
        bucket = self._buckets.setdefault(name, _Bucket(tokens=float(self.burst), refilled_at=now))
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.refilled_at) * self.rate)
        bucket.refilled_at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate
