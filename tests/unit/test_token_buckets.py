"""Per-key token buckets."""

from __future__ import annotations

import pytest

from dsmo.server import token_buckets
from dsmo.server.token_buckets import TokenBuckets


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


def test_waiting_tells_without_taking() -> None:
    clock = Clock()
    buckets = TokenBuckets(rate=1.0, burst=1, clock=clock)
    assert buckets.waiting("10.0.0.1") == 0.0 and buckets.waiting("10.0.0.1") == 0.0
    buckets.take("10.0.0.1")
    assert buckets.waiting("10.0.0.1") == pytest.approx(1.0)
    clock.now += 1
    assert buckets.waiting("10.0.0.1") == 0.0


def test_many_names_do_not_grow_the_table_without_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(token_buckets, "KEPT_NAMES", 3)
    clock = Clock()
    buckets = TokenBuckets(rate=1.0, burst=2, clock=clock)
    for name in ("a", "b", "c"):
        buckets.take(name)
    clock.now += 10  # all three full again: as good as forgotten
    buckets.take("d")
    assert buckets.waiting("a") == 0.0 and len(buckets._buckets) == 1


def test_several_tokens_are_taken_at_once_or_not_at_all() -> None:
    clock = Clock()
    buckets = TokenBuckets(rate=1.0, burst=5, clock=clock)
    assert buckets.take("crm", 3) == 0.0
    assert buckets.take("crm", 3) == pytest.approx(1.0)  # 2 left: none taken
    assert buckets.take("crm", 2) == 0.0
    assert buckets.take("crm") == pytest.approx(1.0)


def test_a_batch_larger_than_the_burst_waits_for_a_full_bucket_and_leaves_a_debt() -> None:
    clock = Clock()
    buckets = TokenBuckets(rate=1.0, burst=5, clock=clock)
    assert buckets.take("crm", 20) == 0.0  # a full bucket lets it through ...
    assert buckets.take("crm") == pytest.approx(16.0)  # ... and the 15 beyond it are paid for first
    clock.now += 16
    assert buckets.take("crm") == 0.0
