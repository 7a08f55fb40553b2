"""The stream position after a trail read some other way (a console page): its last event, and the
stage attempts still open then, each from its first token, so a model's answer under way is
streamed whole and nothing before the position comes again."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dsmo.client.run_stream import StreamCursor
from dsmo.client.stream_positions import position_after
from dsmo.workflows.contracts.run_records import AuditEvent

VERSION = "abc123"


def trail(*entries: tuple[str, str | None, int | None, str | None]) -> list[AuditEvent]:
    """Events from (type, stage, attempt, idempotency key), numbered from 1."""
    events = []
    for seq, (kind, stage, attempt, key) in enumerate(entries, start=1):
        data: dict[str, Any] = {"idempotencyKey": key} if key else {}
        events.append(
            AuditEvent(
                seq=seq,
                type=kind,
                run_id="r",
                at=datetime(2026, 1, 1, tzinfo=UTC),
                stage=stage,
                attempt=attempt,
                workflow_version=VERSION,
                data=data,
            )
        )
    return events


def test_an_attempt_open_at_the_last_event_is_named_at_its_start() -> None:
    events = trail(("RUN_CREATED", None, None, None), ("STAGE_ENQUEUED", "write", 1, "a1"))
    position = position_after(events)
    assert position == f"2;write@a1@1=0.0@{VERSION}"
    cursor = StreamCursor.parse(position)  # one the stream itself reads back
    assert cursor.seq == 2 and [(a.chunk, a.item) for a in cursor.attempts.values()] == [(0, 0)]


def test_ended_and_retried_attempts_are_not_named_and_parallel_ones_all_are() -> None:
    events = trail(
        ("RUN_CREATED", None, None, None),
        ("STAGE_ENQUEUED", "a", 1, "aa"),
        ("STAGE_ENQUEUED", "b", 1, "bb"),
        ("STAGE_ENQUEUED", "c", 1, "cc"),
        ("STAGE_SUCCEEDED", "c", 1, None),  # committed
        ("STAGE_ENQUEUED", "b", 2, "bb"),  # b's first attempt was lost: its retry is open
        ("TOOL_CALLED", "a", 1, None),  # a is still writing
    )
    assert position_after(events) == f"7;a@aa@1=0.0@{VERSION};b@bb@2=0.0@{VERSION}"


def test_a_trail_with_nothing_open_is_its_last_sequence_number_and_no_trail_the_start() -> None:
    done = trail(("RUN_CREATED", None, None, None), ("STAGE_ENQUEUED", "a", 1, "aa"), ("STAGE_FAILED", "a", 1, None))
    assert position_after(done) == "3"
    ended = trail(("STAGE_ENQUEUED", "a", 1, "aa"), ("RUN_ABORTED", None, None, None))
    assert position_after(ended) == "2"
    assert position_after([]) == ""
