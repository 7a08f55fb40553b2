"""The worker's logging holds no lock a thread interrupted mid-call could leave held."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Iterator

import pytest

from dsmo.runtime import logging_setup as worker_logging


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """Where the installed writer writes; the root logger's handlers and level are restored after."""
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    try:
        yield io.StringIO()
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved_handlers:
            root.addHandler(handler)
        root.setLevel(saved_level)


def messages(text: str) -> list[str]:
    return [line.split(": ", 1)[1] for line in text.splitlines()]


def test_records_reach_the_stream_through_a_handler_without_a_lock(stream: io.StringIO) -> None:
    listener = worker_logging.install(logging.INFO, stream=stream)
    (handler,) = logging.getLogger().handlers
    assert isinstance(handler, worker_logging.LockFreeQueueHandler) and handler.lock is None
    threads = [
        threading.Thread(target=lambda n=n: logging.getLogger("dsmo.test").info("from thread %d", n)) for n in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    logging.getLogger("dsmo.test").debug("below the level")
    listener.stop()
    lines = stream.getvalue().splitlines()
    assert sorted(messages(stream.getvalue())) == [f"from thread {n}" for n in range(8)]
    assert all(" INFO dsmo.test: " in line for line in lines)


def test_the_writer_takes_the_queued_lines_together_and_flush_writes_them_at_once(stream: io.StringIO) -> None:
    writer = worker_logging.install(logging.INFO, stream=stream)
    writer.stop()  # no thread from here on: only flush writes
    log = logging.getLogger("dsmo.test")
    log.info("first")
    log.warning("second")
    log.debug("below the level")
    assert stream.getvalue() == ""  # queued, nothing woken to write it
    worker_logging.flush()
    assert messages(stream.getvalue()) == ["first", "second"]
    log.info("third")
    writer.stop()  # again: writes what queued since
    assert messages(stream.getvalue()) == ["first", "second", "third"]
