"""`GET /executions/{id}/stream`: a run's live stream as server-sent events.

Each item of the run's stream (`client/run_stream.py`: its trail events, its model's tokens,
attempt markers, the end) is one SSE event: ``id`` is the item's cursor, ``event`` its kind,
``data`` its JSON. A client that reconnects sends the last id it got (``Last-Event-ID``, which
browsers' `EventSource` sends by itself, or ``?after=``) and gets what it missed, then what
follows, nothing twice. A comment line every `KEEPALIVE_SECONDS` keeps proxies from closing a
quiet stream. Reading takes the scope ``read``; a key holds at most `STREAMS_PER_KEY` at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse

from dsmo.client.client_errors import RunNotFound
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.run_stream import BadCursor, StreamCursor, StreamItem
from dsmo.server.api_keys import ApiKey
from dsmo.server.ingress.dependencies import can_read, dsmo_client
from dsmo.server.ingress.problems import Problem

KEEPALIVE_SECONDS = 15.0
STREAMS_PER_KEY = 16
RECONNECT_MS = 1000  # what a browser waits before it reconnects a dropped stream

router = APIRouter(prefix="/executions", tags=["executions"])


@router.get(
    "/{run_id}/stream",
    summary="Follow a run live: its trail and its model's tokens, as server-sent events",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"text/event-stream": {}},
            "description": "One event per item: `id` (resume after it with Last-Event-ID or ?after=), "
            "`event` (event, attempt, token, abandoned, end) and `data` (JSON).",
        }
    },
)
async def stream(
    run_id: str,
    request: Request,
    key: ApiKey = Depends(can_read),
    dsmo: DsmoClient = Depends(dsmo_client),
    after: str | None = Query(default=None, max_length=8000, description="an item's id: resume after it"),
    last_event_id: str | None = Header(default=None, max_length=8000),
) -> StreamingResponse:
    """200 with the stream until the run has ended (its last event is `end`); 404 for no such run,
    422 for a position the stream never gave, 429 when the key already follows too many runs."""
    position = last_event_id or after
    try:
        StreamCursor.parse(position)
    except BadCursor as err:
        raise Problem(422, "invalid_position", str(err)) from None
    try:
        await dsmo.events_page(run_id, after=0, limit=1)  # a run that does not exist is a 404 now
    except RunNotFound as err:
        raise Problem(404, "run_not_found", str(err)) from None
    following: dict[str, int] = request.app.state.streams_by_key
    if following.get(key.name, 0) >= STREAMS_PER_KEY:
        raise Problem(429, "too_many_streams", f"key {key.name!r} already follows {STREAMS_PER_KEY} streams")
    following[key.name] = following.get(key.name, 0) + 1
    return StreamingResponse(
        _events(dsmo.stream(run_id, after=position), following, key.name),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _events(items: AsyncIterator[StreamItem], following: dict[str, int], key: str) -> AsyncIterator[bytes]:
    """The items as SSE events, with a keep-alive comment whenever the run is quiet."""
    queue: asyncio.Queue[StreamItem | BaseException | None] = asyncio.Queue(maxsize=256)
    reader = asyncio.create_task(_read(items, queue))
    try:
        yield f"retry: {RECONNECT_MS}\n\n".encode()
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
            except TimeoutError:
                yield b": keep-alive\n\n"
                continue
            if item is None:
                return
            if isinstance(item, BaseException):
                yield _event("", "error", {"message": str(item)[:500]})
                return
            yield _event(item.id, item.kind, item.data)
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader
        following[key] = max(following.get(key, 1) - 1, 0)


async def _read(items: AsyncIterator[StreamItem], queue: asyncio.Queue[StreamItem | BaseException | None]) -> None:
    try:
        async for item in items:
            await queue.put(item)
    except Exception as err:  # noqa: BLE001 - the reader learns why its stream ended
        await queue.put(err)
        return
    await queue.put(None)


def _event(item_id: str, kind: str, data: dict[str, Any]) -> bytes:
    head = f"id: {item_id}\n" if item_id else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()
