"""The run's audit trail: append-only, numbered, built by the workflow alone (so replay rebuilds it).

A run that lives long writes its trail to the store in segments, one per continue-as-new
(trail_segments.py); the trail object then holds only the tail written since, and the head
(`TrailHead`: last sequence number, its chain hash, the segments so far) that the next
generation carries instead of the events.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from dsmo.workflows.contracts.run_records import AuditEvent, AuditType
from dsmo.workflows.contracts.trail_io import TrailHead

# The paper's "essential" trail is every contract event; these are added at the "extended" level,
# as are the inference metadata processors report (model, temperature, top_p, seed, prompt version).
EXTENDED_ONLY: frozenset[str] = frozenset({"ACTION_COMPLETED"})
# A generation continues as new once its trail's details reach this, so a segment (and the
# trail a checkpoint carries when a segment could not be written) stays far under the 2 MB
# Temporal allows any payload.
TAIL_BYTES_MAX = 256 * 1024
# What comes from outside the run (events sent to it) is recorded even while it is muted.
FROM_OUTSIDE: frozenset[str] = frozenset({"EVENT_BUFFERED", "EVENT_REJECTED", "EVENT_EXPIRED"})


class AuditTrail:
    def __init__(
        self,
        run_id: str,
        workflow_version: str,
        level: str = "essential",
        on_record: Callable[[AuditEvent], None] | None = None,
    ) -> None:
        self.run_id = run_id
        self.workflow_version = workflow_version
        self.level = level
        self.events: list[AuditEvent] = []  # the tail: events not yet written to a segment
        self.head = TrailHead()  # the events before the tail, in the store
        self.tail_bytes = 0  # roughly, the JSON size of the tail's details
        self.carried_bytes = 0  # ... of the part of the tail a checkpoint carried in
        self.on_record = on_record
        # While a rewound run re-executes its record up to the node it went back to, what it
        # does is in the trail already: only events sent to it meanwhile are recorded (rewind_point.py).
        self.muted = False

    @property
    def extended(self) -> bool:
        return self.level == "extended"

    def record(
        self,
        event_type: AuditType,
        *,
        at: datetime,
        stage: str | None = None,
        attempt: int | None = None,
        agent_version: str | None = None,
        artifact_uris: Iterable[str] = (),
        data: dict[str, Any] | None = None,
    ) -> AuditEvent | None:
        if event_type in EXTENDED_ONLY and not self.extended:
            return None
        if self.muted and event_type not in FROM_OUTSIDE:
            return None
        event = AuditEvent(
            seq=self.head.seq + len(self.events) + 1,
            type=event_type,
            run_id=self.run_id,
            at=at,
            stage=stage,
            attempt=attempt,
            workflow_version=self.workflow_version,
            agent_version=agent_version,
            artifact_uris=list(artifact_uris),
            data=data or {},
        )
        self.events.append(event)
        self.tail_bytes += detail_bytes(event)
        if self.on_record is not None:
            self.on_record(event)
        return event

    def restore(self, head: TrailHead | None, tail: Iterable[AuditEvent]) -> None:
        """Take up a trail from a checkpoint: its head in the store and the tail it carried."""
        self.head = head or TrailHead()
        self.events = list(tail)
        self.tail_bytes = self.carried_bytes = sum(detail_bytes(event) for event in self.events)

    @property
    def fresh_bytes(self) -> int:
        """The tail's size recorded by this generation (a tail carried in because its segment
        could not be written does not make the run continue as new again at once)."""
        return self.tail_bytes - self.carried_bytes

    def advance(self, head: TrailHead) -> None:
        """The tail's events up to ``head.seq`` are in the store now: drop them from the tail."""
        written = head.seq - self.head.seq
        self.head = head
        self.events = self.events[written:]
        self.tail_bytes = sum(detail_bytes(event) for event in self.events)
        self.carried_bytes = 0


def detail_bytes(event: AuditEvent) -> int:
    """About how many bytes ``event`` adds to a checkpoint: its details as JSON, plus a margin."""
    return 256 + len(json.dumps(event.data, separators=(",", ":"), default=str))
