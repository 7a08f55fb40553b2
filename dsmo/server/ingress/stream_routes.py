"""`GET /executions/{id}/stream`: a run's live stream as server-sent events.

Each item of the run's stream (`client/run_stream.py`: its trail events, its model's tokens,
attempt markers, the end) is one SSE event: ``id`` is the item's cursor, ``event`` its kind,
``data`` its JSON. A client that reconnects sends the last id it got (``Last-Event-ID``, which
browsers' `EventSource` sends by itself, or ``?after=``) and gets what it missed, then what
follows, nothing twice. Keep-alives, the response's lifetime and the bound per key are `server/sse.py`'s. Reading takes
the scope ``read``.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse

from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.run_stream import BadCursor, StreamCursor, checked_cursor, follow
from dsmo.server.api_keys import ApiKey
from dsmo.server.ingress.dependencies import can_read, dsmo_client
from dsmo.server.ingress.problems import Problem, documented
from dsmo.server.sse import TooManyStreams, sse_response

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
        },
        **documented(404),
    },
)
async def stream(
    run_id: str,
    request: Request,
    key: ApiKey = Depends(can_read),
    dsmo: DsmoClient = Depends(dsmo_client),
    after: str | None = Query(default=None, max_length=16000, description="an item's id: resume after it"),
    last_event_id: str | None = Header(default=None, max_length=16000),
) -> StreamingResponse:
    """200 with the stream until the run has ended (its last event is `end`); 404 for no such run,
    422 for a position the stream never gave, 429 when the key already follows too many runs."""
    position = last_event_id or after
    try:
        StreamCursor.parse(position)
    except BadCursor as err:
        raise Problem(422, "invalid_position", str(err)) from None
    # A run that does not exist is a 404 now. Asked of Temporal, not of the run: a stream opened
    # while no worker answers (one restarting) waits for one instead of being refused.
    if not await dsmo.core.exists(run_id):
        raise Problem(404, "run_not_found", f"no run {run_id!r}")
    try:  # read against the run's trail before the answer begins: a 422 cannot come later
        await checked_cursor(dsmo.core, run_id, position)
    except BadCursor as err:
        raise Problem(422, "invalid_position", str(err)) from None
    try:
        return sse_response(request, follow(dsmo.core, run_id, after=position, checked=True), key.name)
    except TooManyStreams as err:
        raise Problem(429, err.code, str(err)) from None
