"""A stage attempt's progress chunks: written a tenth of a second after an item, whether or not
another item follows (a model that pauses mid-answer still shows what it wrote)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from dsmo.activities.progress_log import FLUSH_SECONDS, ProgressLog, closing


class Written:
    """Stands in for the store's create-only write: the chunks by key, in the order written."""

    def __init__(self) -> None:
        self.chunks: dict[str, dict[str, Any]] = {}

    def put_if_absent(self, key: str, body: bytes, content_type: str, metadata: dict[str, str]) -> bool:
        assert key not in self.chunks
        self.chunks[key] = json.loads(body)
        return True


async def inline(call: Callable[..., Any], *args: Any) -> Any:
    return call(*args)


async def settled(done: Callable[[], bool], what: str) -> None:
    """Let the loop run until ``done`` (a hang guard of many flush periods, not a timing)."""
    for _ in range(600):
        if done():
            return
        await asyncio.sleep(FLUSH_SECONDS)
    raise AssertionError(f"never: {what}")


def texts(written: Written) -> list[list[str]]:
    return [[item["text"] for item in chunk["items"]] for chunk in written.chunks.values()]


async def test_tokens_before_a_pause_are_written_without_waiting_for_the_next() -> None:
    written = Written()
    log = ProgressLog(written, "p/", inline)  # type: ignore[arg-type]
    for word in ("Let", "me", "think"):
        await log.add({"kind": "token", "text": word})
    assert written.chunks == {}  # a chunk gathers a tenth of a second of tokens
    # The model pauses: no token comes, yet the flusher writes them, then stops (idle: nothing is
    # left running between tokens).
    await settled(lambda: log._flusher is None, "the flusher wrote the tokens and stopped")
    assert texts(written) == [["Let", "me", "think"]] and list(written.chunks) == ["p/000000.json"]

    await log.add({"kind": "token", "text": "..."})
    await log.close()
    assert texts(written) == [["Let", "me", "think"], ["..."]]
    assert [chunk["last"] for chunk in written.chunks.values()] == [False, True]


async def test_an_attempt_that_reports_nothing_writes_nothing() -> None:
    written = Written()
    log = ProgressLog(written, "p/", inline)  # type: ignore[arg-type]
    await asyncio.sleep(FLUSH_SECONDS * 2)
    await log.close()
    assert written.chunks == {}


async def test_closing_while_a_chunk_is_written_waits_for_it_then_writes_the_last() -> None:
    written, started, release = Written(), asyncio.Event(), asyncio.Event()

    async def slow(call: Callable[..., Any], *args: Any) -> Any:
        started.set()
        await release.wait()
        return call(*args)

    log = ProgressLog(written, "p/", slow)  # type: ignore[arg-type]
    await log.add({"kind": "token", "text": "a"})
    await started.wait()  # the flusher is writing chunk 0
    closing = asyncio.create_task(log.close())
    await asyncio.sleep(0)
    release.set()
    await closing
    # Chunk 0 was not cut short by the close: readers, who read by number, find every chunk.
    assert list(written.chunks) == ["p/000000.json", "p/000001.json"]
    assert [chunk["last"] for chunk in written.chunks.values()] == [False, True]


async def test_an_attempt_that_fails_closes_its_log_and_stops_its_flusher() -> None:
    written = Written()
    log = ProgressLog(written, "p/", inline)  # type: ignore[arg-type]
    with pytest.raises(ConnectionError):
        async with closing(log):
            await log.add({"kind": "token", "text": "half"})
            raise ConnectionError("the model's connection dropped")
    assert log._flusher is not None and log._flusher.done()  # nothing outlives the attempt
    assert texts(written) == [["half"]] and [chunk["last"] for chunk in written.chunks.values()] == [True]
