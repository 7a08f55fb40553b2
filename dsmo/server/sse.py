"""Server-sent events: how the ingress and the console send a stream of items to a reader.

Each item is one SSE event (``id``, ``event``, ``data`` as JSON). A comment line every
`KEEPALIVE_SECONDS` keeps proxies from closing a quiet stream. A response ends after the
ingress's ``stream_lifetime`` (``DSMO_INGRESS_STREAM_LIFETIME``) and the client reconnects with
the last id it got, so no connection, and no reader behind it, outlives a proxy's idle limit or
a deploy for long. One key (or one signed-in person) holds at most `STREAMS_PER_KEY` streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse

from dsmo.client.run_stream import StreamItem
from dsmo.workflows.common.errors import DsmoError

KEEPALIVE_SECONDS = 15.0
STREAMS_PER_KEY = 16
RECONNECT_MS = 1000  # what a browser waits before it reconnects a dropped stream


class TooManyStreams(DsmoError):
    """The key (or person) already holds `STREAMS_PER_KEY` streams (an API answers 429)."""

    code = "too_many_streams"


def sse_response(request: Request, items: AsyncIterator[StreamItem], holder: str) -> StreamingResponse:
    """``items`` as a server-sent events response, counted against ``holder``'s open streams.

    Raises:
        TooManyStreams: ``holder`` already holds `STREAMS_PER_KEY` streams.
    """
    following: dict[str, int] = request.app.state.streams_by_key
    if following.get(holder, 0) >= STREAMS_PER_KEY:
        raise TooManyStreams(f"{holder!r} already follows {STREAMS_PER_KEY} streams; close one first")
    lifetime: float = request.app.state.settings.ingress.stream_lifetime
    return StreamingResponse(
        _events(items, following, holder, lifetime),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _events(
    items: AsyncIterator[StreamItem], following: dict[str, int], holder: str, lifetime: float
) -> AsyncIterator[bytes]:
    """The items as SSE events, with a keep-alive comment whenever the run is quiet. After
    ``lifetime`` seconds the server ends the response; the client reconnects with its last id."""
    # Counted once the response streams, and given back in the same `finally`: a client gone
    # before the body began holds nothing.
    following[holder] = following.get(holder, 0) + 1
    queue: asyncio.Queue[StreamItem | BaseException | None] = asyncio.Queue(maxsize=256)
    reader = asyncio.create_task(_read(items, queue))
    loop = asyncio.get_running_loop()
    closes_at = loop.time() + lifetime
    try:
        yield f"retry: {RECONNECT_MS}\n\n".encode()
        while loop.time() < closes_at:
            try:
                item = await asyncio.wait_for(queue.get(), min(KEEPALIVE_SECONDS, max(closes_at - loop.time(), 0.01)))
            except TimeoutError:
                yield b": keep-alive\n\n"
                continue
            if item is None:
                return
            if isinstance(item, BaseException):
                # DSMO's own errors say what is wrong in words meant for the reader; others may
                # name internal addresses.
                said = str(item)[:500] if isinstance(item, DsmoError) else "the stream failed; reconnect"
                yield _event("", "error", {"message": said})
                return
            yield _event(item.id, item.kind, item.data)
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader
        following[holder] = max(following.get(holder, 1) - 1, 0)


async def _read(items: AsyncIterator[StreamItem], queue: asyncio.Queue[StreamItem | BaseException | None]) -> None:
    try:
        async for item in items:
            await queue.put(item)
    except Exception as err:  # noqa: BLE001 - the reader learns why its stream ended
        await queue.put(err)
        return
    await queue.put(None)


def _event(item_id: str, kind: str, data: dict[str, Any]) -> bytes:
    if not kind.isalpha():  # a field line of its own: never a way to write another
        kind = "progress"
    head = f"id: {item_id}\n" if item_id else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()
