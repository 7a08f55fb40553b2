"""A bounded, thread-safe LRU of immutable objects: what a worker wrote is what the next stage reads.

Stage outputs and run inputs are written once (``If-None-Match: *``) and never replaced or
deleted by DSMO, so a copy kept in memory can never go stale. A worker that just wrote stage A's
output serves stage B's read of it without a round trip to the store; other workers' objects are
read from the store as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

MIB = 1024 * 1024


class ImmutableCache:
    def __init__(self, max_bytes: int, *, max_item_bytes: int = MIB) -> None:
        self.max_bytes = max_bytes
        # Large artifacts would evict many small ones for one saved read: they are not kept.
        self.max_item_bytes = min(max_item_bytes, max_bytes)
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def size(self) -> int:
        return self._size

    def get(self, key: str) -> bytes | None:
        with self._lock:
            body = self._items.get(key)
            if body is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return body

    def put(self, key: str, body: bytes) -> None:
        if len(body) > self.max_item_bytes:
            return
        with self._lock:
            previous = self._items.pop(key, None)
            if previous is not None:
                self._size -= len(previous)
            self._items[key] = body
            self._size += len(body)
            while self._size > self.max_bytes:
                _, evicted = self._items.popitem(last=False)
                self._size -= len(evicted)
