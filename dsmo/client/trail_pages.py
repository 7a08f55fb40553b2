"""Paging a run's audit trail: the one rule the client, `dsmo events` and the console share.

A trail's sequence numbers run from 1 without gaps, so a page is a window of them: the cursor
is a sequence number, and a page is read without reading (or parsing) the events outside it.
An ended run's trail is its export (one object: only the page's lines are parsed); a running
run's is its segments in the store (only the segments that hold the page are read) and the
events the run holds since its last segment.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from dsmo.client.core import ClientCore
from dsmo.client.run_trails import trail
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.run_records import AuditEvent

DEFAULT_LIMIT = 100  # events on a page unless asked otherwise: the first screen stays fast
MAX_LIMIT = 1000  # the most one page holds; everything is read page by page


@dataclass(frozen=True)
class TrailPage:
    """One page of a run's audit trail.

    Attributes:
        events: The page's events, in order (consecutive sequence numbers).
        total: The trail's length so far (its last sequence number).
        next_after: The cursor of the next page (pass it as ``after``), or None at the end.
        previous_before: The cursor of the page before (pass it as ``before``), or None at the start.
    """

    events: list[AuditEvent]
    total: int
    next_after: int | None
    previous_before: int | None


def checked_window(
    total: int, *, after: int | None = None, before: int | None = None, limit: int = DEFAULT_LIMIT
) -> tuple[int, int]:
    """The sequence numbers ``(low, high]`` of a page: the paging rule.

    Args:
        total: The trail's length (its last sequence number).
        after: Events after this sequence number (the next page's cursor).
        before: Events before this sequence number (the previous page's cursor).
        limit: At most this many events (1 to `MAX_LIMIT`).

    Returns:
        ``(low, high)``: the page holds sequence numbers ``low + 1`` to ``high``. Neither
        cursor: the latest ``limit`` events.

    Raises:
        DsmoError: A cursor or the limit is out of range, or both cursors are given.
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise DsmoError(f"limit: must be between 1 and {MAX_LIMIT}, got {limit}")
    if after is not None and before is not None:
        raise DsmoError("after: give either after or before, not both")
    if after is not None:
        if after < 0:
            raise DsmoError(f"after: must be a sequence number (0 or more), got {after}")
        low = min(after, total)
        return low, min(low + limit, total)
    if before is not None:
        if before < 1:
            raise DsmoError(f"before: must be a sequence number (1 or more), got {before}")
        high = min(before - 1, total)
        return max(high - limit, 0), high
    return max(total - limit, 0), total


def page_of(
    events: list[AuditEvent], *, after: int | None = None, before: int | None = None, limit: int = DEFAULT_LIMIT
) -> TrailPage:
    """A page of a trail already in hand (its events from sequence number 1, in order)."""
    low, high = checked_window(len(events), after=after, before=before, limit=limit)
    return _page(events[low:high], len(events), low, high)


def _page(events: list[AuditEvent], total: int, low: int, high: int) -> TrailPage:
    return TrailPage(
        events=events,
        total=total,
        next_after=high if high < total else None,
        previous_before=low + 1 if low > 0 else None,
    )


async def trail_page(
    core: ClientCore,
    run_id: str,
    *,
    after: int | None = None,
    before: int | None = None,
    limit: int = DEFAULT_LIMIT,
    live: bool = False,
) -> TrailPage:
    """One page of a run's trail, reading only what the page needs (see the module's docstring).

    Raises:
        DsmoError: A cursor or the limit is out of range.
        RunNotFound: No run has this id.
    """
    checked_window(0, after=after, before=before, limit=limit)  # bad input fails before any read
    lines = await _export_lines(core, run_id, live=live)
    if lines is not None:
        return await _export_page(core, lines, after=after, before=before, limit=limit)
    store = core.trail_store()
    view = await trail(core, run_id)
    stored = view.head.seq if view.head.segments else 0
    total = stored + len(view.events)
    low, high = checked_window(total, after=after, before=before, limit=limit)
    earlier: list[AuditEvent] = []
    if low < stored:
        earlier = await asyncio.to_thread(
            store.segment_window, run_id, view.head.segments, stored, low, min(high, stored)
        )
    later = view.events[max(low - stored, 0) : max(high - stored, 0)]
    return _page(earlier + later, total, low, high)


async def trail_pages(
    core: ClientCore, run_id: str, *, after: int = 0, limit: int = MAX_LIMIT, live: bool = False
) -> AsyncIterator[TrailPage]:
    """The run's trail from ``after`` to its end, page by page: one page of events is parsed at a
    time (an ended run's export is read once, as its lines; a running run's segments one by one)."""
    checked_window(0, after=after, limit=limit)
    lines = await _export_lines(core, run_id, live=live)  # an ended run's export is read once
    cursor: int | None = after
    while cursor is not None:
        if lines is not None:
            page = await _export_page(core, lines, after=cursor, limit=limit)
        else:
            page = await trail_page(core, run_id, after=cursor, limit=limit, live=live)
        if page.events:
            yield page
        cursor = page.next_after


async def _export_lines(core: ClientCore, run_id: str, *, live: bool) -> list[bytes] | None:
    """The lines of the trail an ended run exported (not parsed), or None for a running run."""
    if live or not await core.has_ended(run_id):
        return None
    body = await asyncio.to_thread(core.trail_store().export, run_id)
    return None if body is None else body.splitlines()


async def _export_page(
    core: ClientCore, lines: list[bytes], *, after: int | None = None, before: int | None = None, limit: int
) -> TrailPage:
    """A page of an exported trail: only its own lines are parsed (line N holds sequence number N)."""
    low, high = checked_window(len(lines), after=after, before=before, limit=limit)
    events = await asyncio.to_thread(core.trail_store().parse_lines, lines[low:high])
    return _page(events, len(lines), low, high)
