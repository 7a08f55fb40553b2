"""A run's inbox: events that arrived before a wait could take them, kept in arrival order.

What may enter, and when an entry is taken, is decided in intake.py; this module holds the
entries, their bounds (`inbox:` in a definition) and the summary the `status` query shows.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta

from pydantic import Field, field_validator

from dsmo.workflows.common.durations import Duration, format_duration
from dsmo.workflows.common.wire import CamelModel, WireModel
from dsmo.workflows.events.resume_events import ResumeEvent

DEFAULT_TTL = timedelta(days=7)  # as long as the default wait for documents, signatures and tests
MAX_TTL = timedelta(days=30)  # the longest any wait may last
DEFAULT_MAX_EVENTS = 20
MAX_MAX_EVENTS = 100
# The inbox travels in the continue-as-new input, which Temporal caps at 2 MB beside the audit trail.
MAX_INBOX_BYTES = 256 * 1024


class InboxPolicy(CamelModel):
    """How long a run keeps events no wait has taken yet, and how many (a definition's ``inbox:``).

    Attributes:
        ttl: How long an event is kept after it arrived; then it expires (``EVENT_EXPIRED``).
        max_events: How many events the inbox holds; one more is refused with a reason.
    """

    ttl: Duration = DEFAULT_TTL
    max_events: int = Field(default=DEFAULT_MAX_EVENTS, ge=1, le=MAX_MAX_EVENTS)

    @field_validator("ttl")
    @classmethod
    def _within_maximum(cls, value: timedelta) -> timedelta:
        if value > MAX_TTL:
            raise ValueError(f"{format_duration(value)} is above the maximum of {format_duration(MAX_TTL)}")
        return value


DEFAULT_POLICY = InboxPolicy()


class InboxEntry(WireModel):
    """One kept event, with when and how it arrived."""

    event: ResumeEvent
    arrived_at: datetime
    via: str
    size: int = 0  # bytes of the event's data as JSON

    def expires_at(self, policy: InboxPolicy) -> datetime:
        return self.arrived_at + policy.ttl

    def audit_data(self, **extra: str) -> dict[str, str]:
        """What the audit trail says of this entry when it is taken or expires."""
        return {
            "eventType": self.event.type,
            "eventId": self.event.event_id,
            "bufferedAt": self.arrived_at.isoformat(),
            **extra,
        }


class InboxView(WireModel):
    """What a run's inbox holds (in the `status` query).

    Attributes:
        count: Events kept.
        kinds: How many of each event type.
        oldest_at: When the oldest kept event arrived.
        oldest_event_id: The oldest kept event's id.
    """

    count: int
    kinds: dict[str, int]
    oldest_at: datetime
    oldest_event_id: str


def event_size(event: ResumeEvent) -> int:
    """The bytes an event takes in the inbox (its data as compact JSON)."""
    return len(json.dumps(event.data, ensure_ascii=False, separators=(",", ":"), default=str).encode())


def full_reason(entries: list[InboxEntry], policy: InboxPolicy, incoming: int) -> str | None:
    """Why one more event of ``incoming`` bytes does not fit, or None."""
    if len(entries) >= policy.max_events:
        return f"the run's inbox is full ({len(entries)} events kept, inbox.maxEvents is {policy.max_events})"
    used = sum(entry.size for entry in entries)
    if used + incoming > MAX_INBOX_BYTES:
        return f"the run's inbox is full ({used} of {MAX_INBOX_BYTES} bytes kept)"
    return None


def inbox_view(entries: list[InboxEntry]) -> InboxView | None:
    if not entries:
        return None
    oldest = entries[0]
    return InboxView(
        count=len(entries),
        kinds=dict(sorted(Counter(entry.event.type for entry in entries).items())),
        oldest_at=oldest.arrived_at,
        oldest_event_id=oldest.event.event_id,
    )
