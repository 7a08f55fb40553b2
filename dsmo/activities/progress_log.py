"""A stage attempt's progress in the store: what a run's live stream shows besides its trail.

A model's tokens as they arrive (an `llm` stage with ``stream: true``) are not audited: they are
a view, and the recorded answer stays the truth. The attempt writes them beside its output, in
numbered write-once chunks (``artifacts/<version>/<run>/progress/<key>/attempt=N/000000.json``, ...) of a
tenth of a second each, the last one marked ``last``. A reader follows them by number (one GET
each, no listing) from the moment the trail says the attempt was enqueued, so a reader that
reconnects reads the chunks it missed. Kept under the run's artifacts, the chunks go when they
go (retention, erasure). A run about a data subject writes none: its words stay sealed.

A plugin agent reports its own progress with `report_progress` (``dsmo.progress``) from inside
its function, on the event loop or on a thread: the items go out the same way, a tenth of a
second at a time; an attempt that reports nothing writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from dsmo.activities.artifacts import ARTIFACT_PREFIX, ArtifactStore, encode_json
from dsmo.workflows.contracts.activity_io import StageTask

log = logging.getLogger("dsmo.progress")
FLUSH_SECONDS = 0.1  # how long tokens wait before they are written for readers
MAX_ITEMS = 256  # the most items one chunk holds
MAX_ITEM_BYTES = 4096  # the most of one progress report a reader is shown

# The progress log of the plugin agent's stage attempt running in this context (see `report_progress`).
CURRENT: ContextVar[ProgressLog | None] = ContextVar("dsmo_progress", default=None)


def report_progress(**fields: Any) -> None:
    """Tell whoever follows the run what the agent is doing (``dsmo.progress(step="parsing", done=3)``).

    Call it from inside an agent's function (a plain or an async one). The fields (JSON values)
    go to the run's live stream as a ``progress`` item; they are not audited and not part of the
    stage's output. Outside a stage, or in a run about a data subject, it does nothing.

    Args:
        **fields: What to show: JSON values (a report over 4 KiB is shown as ``truncated``).
    """
    log = CURRENT.get()
    if log is not None:
        item = {**fields, "kind": "progress"}  # an agent's field never names the item's kind
        if len(encode_json(item)) > MAX_ITEM_BYTES:
            item = {"kind": "progress", "truncated": True}
        log.post(item)


def progress_folder(workflow_version: str, run_id: str, idempotency_key: str, attempt: int) -> str:
    """The folder of one stage attempt's progress chunks, under the run's artifacts (so the run's
    retention and erasure reach it), named by what the trail's `STAGE_ENQUEUED` says of it."""
    return f"{ARTIFACT_PREFIX}{workflow_version}/{run_id}/progress/{idempotency_key}/attempt={attempt}/"


def task_progress_folder(task: StageTask) -> str:
    """The progress folder of the stage attempt ``task`` asks for."""
    return progress_folder(task.workflow_version, task.run_id, task.idempotency_key, task.attempt)


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

    def __init__(
        self,
        store: ArtifactStore,
        folder: str,
        io: Callable[..., Awaitable[Any]],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.store = store
        self.folder = folder
        self.io = io
        self.loop = loop
        self.items: list[dict[str, Any]] = []
        self.chunk = 0
        self.closed = False
        self._flusher: asyncio.Task[None] | None = None
        self._writing: asyncio.Task[None] | None = None  # the flusher's chunk being written
        self._lock = threading.Lock()  # a plugin's thread posts while the loop takes a chunk

    def post(self, item: dict[str, Any]) -> None:
        """Keep ``item`` from any thread; a task on ``loop`` writes the chunks (started by the first)."""
        with self._lock:
            if len(self.items) >= MAX_ITEMS:  # a chunk's worth waiting: the newest replaces the last
                self.items[-1] = item
            else:
                self.items.append(item)
        if self._flusher is None and self.loop is not None and not self.closed:
            self.loop.call_soon_threadsafe(self._start_flusher)

    def _start_flusher(self) -> None:
        if self._flusher is None and not self.closed:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_every())

    async def _flush_every(self) -> None:
        while not self.closed:
            await asyncio.sleep(FLUSH_SECONDS)
            if not self.items:
                break  # nothing came for a tenth of a second: the next item starts another
            # Shielded: `close` stops the flusher, never a chunk half-way, whose number is taken
            # (readers read the chunks by number: a missing one would stop them).
            self._writing = asyncio.ensure_future(self.flush())
            await asyncio.shield(self._writing)
        self._flusher = None
        if self.items and not self.closed:  # posted from a thread as this one was ending
            self._start_flusher()

    async def add(self, item: dict[str, Any]) -> None:
        """Keep ``item``; the chunk is written once it is full, or a tenth of a second later.

        On a timer, not on the next item: a model that pauses mid-answer (thinking, or writing a
        tool call's arguments) leaves what it wrote so far on screen, not held back until it goes on.
        """
        with self._lock:
            self.items.append(item)
        if len(self.items) >= MAX_ITEMS:
            await self.flush()
        elif self._flusher is None and not self.closed:
            self._start_flusher()

    async def flush(self, *, last: bool = False) -> None:
        """Write the items kept so far as the next chunk (the last one with ``last``)."""
        if self.closed or (not self.items and not last):
            return
        with self._lock:
            document = {"items": self.items, "last": last}
            self.items = []
        key = progress_key(self.folder, self.chunk)
        self.chunk += 1
        self.closed = last
        try:
            # Not through the store's cache of what it wrote: no one on this worker reads these back.
            await self.io(self.store.put_if_absent, key, encode_json(document), "application/json", {})
        except Exception:  # the stream is a view: losing it never fails the stage
            log.warning("progress of %s not written; the live stream stops here", self.folder, exc_info=True)
            self.closed = True

    async def close(self) -> None:
        """The attempt is done: write what is left, as the last chunk (nothing if it reported nothing)."""
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        if self._writing is not None:
            await self._writing  # `flush` keeps its own errors
        if self.chunk == 0 and not self.items:
            self.closed = True
            return
        await self.flush(last=True)


@contextlib.asynccontextmanager
async def closing(log: ProgressLog | None) -> AsyncIterator[ProgressLog | None]:
    """``log`` for the block, closed when it ends however it ends (None: nothing to close)."""
    try:
        yield log
    finally:
        if log is not None:
            await log.close()
