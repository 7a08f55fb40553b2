"""Server-sent events: how the ingress and the console send a stream of items to a reader.

Each item is one SSE event (``id``, ``event``, ``data`` as JSON). A comment line every
`KEEPALIVE_SECONDS` keeps proxies from closing a quiet stream. A response ends after the
ingress's ``stream_lifetime`` (``DSMO_INGRESS_STREAM_LIFETIME``) and the client reconnects with
the last id it got, so no connection, and no reader behind it, outlives a proxy's idle limit or
a deploy for long. One key (or one signed-in person) holds at most `STREAMS_PER_KEY` streams,
counted from the moment a stream is admitted until its response is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

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

    The stream is counted here, when it is admitted, and given back when its response is done:
    the run ended, the response's lifetime passed, the client went away, or anything failed.

    Raises:
        TooManyStreams: ``holder`` already holds `STREAMS_PER_KEY` streams.
    """
    following: dict[str, int] = request.app.state.streams_by_key
    # The check and the count are one step (no await between them): streams opened at the same
    # moment each see the ones admitted before them, so no burst gets past the bound.
    if following.get(holder, 0) >= STREAMS_PER_KEY:
        raise TooManyStreams(f"{holder!r} already follows {STREAMS_PER_KEY} streams; close one first")
    held = _Held(following, holder)
    lifetime: float = request.app.state.settings.ingress.stream_lifetime
    return _HeldStream(
        held,
        _events(items, lifetime),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


class _Held:
    """One admitted stream in its holder's count, given back once however the stream ends."""

    def __init__(self, following: dict[str, int], holder: str) -> None:
        self.following, self.holder, self.held = following, holder, True
        following[holder] = following.get(holder, 0) + 1

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        left = self.following.get(self.holder, 1) - 1
        if left > 0:
            self.following[self.holder] = left
        else:
            self.following.pop(self.holder, None)  # no entry kept for every key that ever streamed


class _HeldStream(StreamingResponse):
    """A streaming response that gives its count back when it is done, sent or not."""

    def __init__(self, held: _Held, content: AsyncIterator[bytes], **options: Any) -> None:
        super().__init__(content, **options)
        self.held = held

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # Given back before anything else can fail; then the body is closed, which stops its
            # reader, even when the client left while an item was being sent.
            self.held.release()
            body = self.body_iterator
            if isinstance(body, AsyncGenerator):
                with contextlib.suppress(Exception):
                    await body.aclose()


async def _events(items: AsyncIterator[StreamItem], lifetime: float) -> AsyncIterator[bytes]:
    """The items as SSE events, with a keep-alive comment whenever the run is quiet. After
    ``lifetime`` seconds the server ends the response; the client reconnects with its last id."""
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
