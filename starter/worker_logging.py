"""Logging for a worker process that an interrupted workflow thread cannot wedge.

When a workflow task runs past Temporal's deadlock timeout (2 s), the SDK interrupts the
workflow's thread by raising an exception into it asynchronously. If that exception lands while
the thread holds a logging handler's lock (``Handler.acquire`` has returned but its caller's
``try``/``finally`` has not begun), the lock is never released: the next log call on any thread
blocks for good, and the worker's event loop, which logs the failed task, stops serving every
run. This module makes the process's only handler lock-free: records go to a ``SimpleQueue``
(a C-level put, nothing to leak) and one listener thread, never interrupted, writes them out.
"""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import queue
import sys
from typing import TextIO

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class LockFreeQueueHandler(logging.handlers.QueueHandler):
    """A queue handler without the per-handler lock: enqueuing needs no mutual exclusion."""

    def createLock(self) -> None:
        # ``Handler.acquire``/``release`` do nothing when there is no lock.
        self.lock = None


class _Listener(logging.handlers.QueueListener):
    """A queue listener whose ``stop`` may be called again (by the caller, then at exit)."""

    def stop(self) -> None:
        if self._thread is not None:
            super().stop()


def install(level: int = logging.INFO, *, stream: TextIO | None = None) -> logging.handlers.QueueListener:
    """Route the root logger through a lock-free queue to a stream handler on a listener thread.

    Args:
        level: The root logger's level.
        stream: Where records are written (default ``sys.stderr``).

    Returns:
        The started listener; it is stopped (and the queue flushed) at interpreter exit.
    """
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    writer = logging.StreamHandler(stream or sys.stderr)
    writer.setFormatter(logging.Formatter(LOG_FORMAT))
    listener = _Listener(records, writer, respect_handler_level=True)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(LockFreeQueueHandler(records))
    root.setLevel(level)
    listener.start()
    atexit.register(listener.stop)
    return listener
