"""The worker freezes its start-up heap: full collections skip it, and later garbage is still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from dsmo.runtime.heap import freeze_startup_heap


class Node:
    """A reference cycle: only the cyclic collector can free it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def restored_collector() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.collect()


def _dropped_cycle() -> weakref.ref[Node]:
    node = Node()
    return weakref.ref(node)


def test_the_start_up_heap_leaves_the_collectors_reach(restored_collector: None) -> None:
    before = _dropped_cycle()  # already unreachable, collected by the freeze's own collection
    kept = Node()
    alive_at_start = weakref.ref(kept)

    frozen = freeze_startup_heap()

    # A frozen object can still be freed when its last reference goes (another thread's, such as a
    # test runner's), so the count may only have fallen since.
    assert frozen >= gc.get_freeze_count() > 1000
    assert before() is None
    del kept
    gc.collect()
    assert alive_at_start() is not None, "a frozen object is no longer walked, so its cycle stays"
    gc.unfreeze()
    gc.collect()
    assert alive_at_start() is None


def test_garbage_made_after_the_freeze_is_still_collected(restored_collector: None) -> None:
    freeze_startup_heap()
    later = _dropped_cycle()
    gc.collect()
    assert later() is None
