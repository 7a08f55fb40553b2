"""The worker process's heap: what it builds at start is kept out of the garbage collector's way."""

from __future__ import annotations

import gc


def freeze_startup_heap() -> int:
    """Move every object alive now out of the garbage collector's reach; returns how many.

    Call it once start-up is done. What a worker builds then (modules, the SDK, the plugins,
    their schemas) lives until the process exits, yet each full collection walked all of it:
    with 200 model calls in flight one such pause stopped the event loop, and every call with
    it, for 0.15-0.21 s; with the start-up heap frozen, the same collection took 0.05-0.07 s.
    Garbage present now is collected first, and objects made later are collected as before.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
