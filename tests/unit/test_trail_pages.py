"""The trail's paging rule: windows of sequence numbers, cursors that continue exactly."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dsmo.client.trail_pages import MAX_LIMIT, checked_window, page_of
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.run_records import AuditEvent


def trail(length: int) -> list[AuditEvent]:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        AuditEvent.model_validate({"seq": seq, "at": at, "type": "STAGE_STARTED", "runId": "r", "workflowVersion": "v"})
        for seq in range(1, length + 1)
    ]


def test_windows() -> None:
    assert checked_window(250, limit=100) == (150, 250)  # no cursor: the latest
    assert checked_window(250, after=0, limit=100) == (0, 100)
    assert checked_window(250, after=200, limit=100) == (200, 250)
    assert checked_window(250, after=900, limit=100) == (250, 250)
    assert checked_window(250, before=151, limit=100) == (50, 150)
    assert checked_window(250, before=30, limit=100) == (0, 29)
    assert checked_window(0, limit=100) == (0, 0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, "limit: must be between 1 and"),
        ({"limit": MAX_LIMIT + 1}, "limit: must be between 1 and"),
        ({"after": -1}, "after: must be a sequence number"),
        ({"before": 0}, "before: must be a sequence number"),
        ({"after": 1, "before": 5}, "after: give either"),
    ],
)
def test_bad_cursors_are_refused(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(DsmoError, match=message):
        checked_window(10, **kwargs)


def test_pages_forward_and_back_cover_the_trail_once() -> None:
    events = trail(257)
    forward: list[int] = []
    cursor: int | None = 0
    while cursor is not None:
        page = page_of(events, after=cursor, limit=40)
        forward += [event.seq for event in page.events]
        cursor = page.next_after
    assert forward == list(range(1, 258))
    backward: list[int] = []
    page = page_of(events, limit=40)
    assert [event.seq for event in page.events] == list(range(218, 258)) and page.next_after is None
    while True:
        backward = [event.seq for event in page.events] + backward
        if page.previous_before is None:
            break
        page = page_of(events, before=page.previous_before, limit=40)
    assert backward == list(range(1, 258))
