"""The immutable-object cache: bounded by bytes, least recently used out first, large items skipped."""

from __future__ import annotations

import threading

from dsmo.activities.artifact_cache import ImmutableCache


def test_hits_and_misses_are_counted() -> None:
    cache = ImmutableCache(1_000)
    assert cache.get("a") is None
    cache.put("a", b"alpha")
    assert cache.get("a") == b"alpha"
    assert (cache.hits, cache.misses) == (1, 1)


def test_least_recently_used_goes_first_when_full() -> None:
    cache = ImmutableCache(30, max_item_bytes=10)
    for key in "abc":
        cache.put(key, key.encode() * 10)
    cache.get("a")  # a is now the most recently used
    cache.put("d", b"d" * 10)
    assert cache.get("b") is None
    assert [key for key in "acd" if cache.get(key) is not None] == ["a", "c", "d"]
    assert cache.size == 30 and len(cache) == 3


def test_items_above_the_item_cap_are_not_kept() -> None:
    cache = ImmutableCache(1_000, max_item_bytes=100)
    cache.put("big", b"x" * 101)
    cache.put("small", b"x" * 100)
    assert cache.get("big") is None and cache.get("small") is not None
    assert cache.size == 100


def test_the_item_cap_never_exceeds_the_whole_cache() -> None:
    cache = ImmutableCache(50)
    cache.put("k", b"x" * 60)
    assert len(cache) == 0 and cache.size == 0


def test_putting_a_key_again_does_not_count_it_twice() -> None:
    cache = ImmutableCache(100)
    cache.put("k", b"x" * 40)
    cache.put("k", b"y" * 40)
    assert cache.size == 40 and cache.get("k") == b"y" * 40


def test_concurrent_writers_keep_the_size_exact() -> None:
    cache = ImmutableCache(10_000, max_item_bytes=100)

    def write(prefix: str) -> None:
        for index in range(2_000):
            cache.put(f"{prefix}{index % 300}", b"z" * (index % 100 + 1))
            cache.get(f"{prefix}{(index * 7) % 300}")

    threads = [threading.Thread(target=write, args=(name,)) for name in "abcd"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.size <= 10_000
    assert cache.size == sum(len(cache.get(key) or b"") for key in list(cache._items))
