"""A stage attempt's progress in the store: what a run's live stream shows besides its trail.

A model's tokens as they arrive (an `llm` stage with ``stream: true``) are not audited: they are
a view, and the recorded answer stays the truth. The attempt writes them beside its output, in
numbered write-once chunks (``artifacts/<version>/<run>/progress/<key>/attempt=N/000000.json``, ...) of a
tenth of a second each, the last one marked ``last``. A reader follows them by number (one GET
each, no listing) from the moment the trail says the attempt was enqueued, so a reader that
reconnects reads the chunks it missed. Kept under the run's artifacts, the chunks go when they
go (retention, erasure). A run about a data subject writes none: its words stay sealed.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from dsmo.activities.artifacts import ARTIFACT_PREFIX, ArtifactStore, encode_json

FLUSH_SECONDS = 0.1  # how long tokens wait before they are written for readers
MAX_ITEMS = 256  # the most items one chunk holds


def progress_folder(workflow_version: str, run_id: str, idempotency_key: str, attempt: int) -> str:
    """The folder of one stage attempt's progress chunks, under the run's artifacts (so the run's
    retention and erasure reach it), named by what the trail's `STAGE_ENQUEUED` says of it."""
    return f"{ARTIFACT_PREFIX}{workflow_version}/{run_id}/progress/{idempotency_key}/attempt={attempt}/"


def progress_key(folder: str, chunk: int) -> str:
    """The key of chunk number ``chunk`` in an attempt's progress ``folder``."""
    return f"{folder}{chunk:06d}.json"


class ProgressLog:
    """Writes one stage attempt's progress items in chunks (see the module).

    Args:
        store: Where the chunks go.
        folder: The attempt's progress folder (`progress_folder`).
        io: Runs a blocking store call off the event loop.
    """

    def __init__(self, store: ArtifactStore, folder: str, io: Callable[..., Awaitable[Any]]) -> None:
        self.store = store
        self.folder = folder
        self.io = io
        self.items: list[dict[str, Any]] = []
        self.chunk = 0
        self.flushed_at = time.monotonic()
        self.closed = False

    async def add(self, item: dict[str, Any]) -> None:
        """Keep ``item``; write the chunk when it has waited long enough or is full."""
        self.items.append(item)
        if len(self.items) >= MAX_ITEMS or time.monotonic() - self.flushed_at >= FLUSH_SECONDS:
            await self.flush()

    async def flush(self, *, last: bool = False) -> None:
        """Write the items kept so far as the next chunk (the last one with ``last``)."""
        if self.closed or (not self.items and not last):
            return
        document = {"items": self.items, "last": last}
        key = progress_key(self.folder, self.chunk)
        self.items, self.chunk, self.flushed_at = [], self.chunk + 1, time.monotonic()
        self.closed = last
        # Not through the store's cache of what it wrote: no one on this worker reads these back.
        await self.io(self.store.put_if_absent, key, encode_json(document), "application/json", {})

    async def close(self) -> None:
        """The attempt is done: write what is left, as the last chunk."""
        await self.flush(last=True)
