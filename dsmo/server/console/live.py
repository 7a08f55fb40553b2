"""The console's live pages: a run page and the task list follow what changes without a reload.

A run page opens its run's stream (`GET /console/runs/{id}/stream`: the same server-sent events
as the API's, signed in by the session instead of a key) from the trail event it was drawn at,
with the stage attempts still open then read from their start (`client/stream_positions.py`);
``live.js`` redraws the page when the run's state changes and shows a model's tokens as they
arrive. The task list opens `GET /console/tasks/stream`, which looks at the tasks every
`TASKS_EVERY_SECONDS` and sends the digest of the list whenever it changes; the page redraws
when the digest is not the one it was drawn with. Browsers reconnect by themselves, with the
last id they got.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from dsmo.client.run_stream import BadCursor, StreamCursor, StreamItem, checked_cursor, follow
from dsmo.client.task_list import FilterError, TaskFilter, TaskPage, task_page
from dsmo.server.console.auth import CONSOLE, ConsoleProblem, Viewer, viewer_with
from dsmo.server.console.web import checked_run_id, console
from dsmo.server.sse import TooManyStreams, sse_response

TASKS_EVERY_SECONDS = 2.0

router = APIRouter(prefix=CONSOLE, include_in_schema=False)
can_read = viewer_with("read")


def tasks_digest(page: TaskPage) -> str:
    """What a task list shows, in a few characters: the page is redrawn when this changes."""
    shown = "\n".join(f"{task.run_id} {task.kind} {task.assignee or ''}" for task in page.tasks)
    return hashlib.sha256(f"{page.total}\n{shown}".encode()).hexdigest()[:16]


@router.get("/runs/{run_id}/stream")
async def run_stream(
    request: Request, run_id: str, after: str = "", viewer: Viewer = Depends(can_read)
) -> StreamingResponse:
    """The run's stream from ``after`` (or ``Last-Event-ID``); what is wrong before it begins is a
    page: 404 for no such run, 422 for a position its stream never gave, 429 for too many streams."""
    checked_run_id(run_id)
    position = request.headers.get("last-event-id") or after or None
    try:
        StreamCursor.parse(position)
    except BadCursor as err:
        raise ConsoleProblem(422, str(err)) from None
    dsmo = console(request).dsmo
    # Refused with a status before the stream begins, as the API's stream route does: a browser's
    # EventSource gives up on an error page, where an `error` item inside a 200 stream would have
    # it reconnect every second. Whether the run exists is asked of Temporal, not of the run: a
    # stream opened while no worker answers waits for one.
    if not await dsmo.core.exists(run_id):
        raise ConsoleProblem(404, f"no run {run_id!r}")
    try:
        await checked_cursor(dsmo.core, run_id, position)
    except BadCursor as err:
        raise ConsoleProblem(422, str(err)) from None
    return _answer(request, follow(dsmo.core, run_id, after=position, checked=True), viewer)


@router.get("/tasks/stream")
async def tasks_stream(
    request: Request,
    viewer: Viewer = Depends(can_read),
    kind: str = "",
    agent: str = "",
    assignee: str = "",
    overdue: bool = False,
    run: str = "",
) -> StreamingResponse:
    filters = TaskFilter(kind or None, agent or None, assignee or None, overdue, run or None)
    try:
        filters.check()
    except FilterError as err:
        raise ConsoleProblem(422, str(err)) from None
    return _answer(request, _digests(request, filters), viewer)


def _answer(request: Request, items: AsyncIterator[StreamItem], viewer: Viewer) -> StreamingResponse:
    try:
        return sse_response(request, items, f"console:{viewer.key.name}")
    except TooManyStreams as err:
        raise ConsoleProblem(429, str(err)) from None


async def _digests(request: Request, filters: TaskFilter) -> AsyncIterator[StreamItem]:
    app, last = console(request), None
    while True:
        page = await task_page(app.dsmo.core, filters, datetime.now(UTC), counts=app.task_counts)
        digest = tasks_digest(page)
        if digest != last:
            yield StreamItem(digest, "tasks", {"digest": digest, "total": page.total})
            last = digest
        await asyncio.sleep(TASKS_EVERY_SECONDS)
