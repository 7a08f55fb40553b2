"""Per-key token buckets."""

from __future__ import annotations

import pytest

from dsmo.starter.rate_limit import TokenBuckets


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate_and_keys_are_counted_apart() -> None:
    clock = Clock()
    buckets = TokenBuckets(rate=2.0, burst=3, clock=clock)
    assert [buckets.take("crm") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("crm") == pytest.approx(0.5)  # one token comes every 0.5 s
    assert buckets.take("portal") == 0.0  # another key has its own bucket
    clock.now += 0.5
    assert buckets.take("crm") == 0.0
    assert buckets.take("crm") == pytest.approx(0.5)
    clock.now += 60  # a long quiet spell refills up to the burst, not beyond
    assert [buckets.take("crm") for _ in range(4)][-1] > 0
