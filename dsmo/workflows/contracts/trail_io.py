"""What a run's audit trail exchanges with the store: its segments, its head, its export.

The workflow builds the trail (audit.py); activities write it (activities/audit_log.py). These
are the small models between them, and what a continue-as-new carries of the trail.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from dsmo.workflows.common.wire import WireModel
from dsmo.workflows.contracts.subject_io import SubjectSeal
from dsmo.workflows.definition.retention import Retention

# The hash the first event of a trail chains from (see `dsmo audit verify`).
GENESIS_HASH = "0" * 64


class TrailHead(WireModel):
    """Where a run's audit trail stands in the store: what a continue-as-new carries of it.

    Attributes:
        seq: The last event written to a segment (0 when none is).
        hash: That event's chain hash (`GENESIS_HASH` when none is).
        segments: How many segment objects hold the events up to ``seq``.
    """

    seq: int = 0
    hash: str = GENESIS_HASH
    segments: int = 0


class AuditSegment(WireModel):
    """Events of one generation of a run, written once to the store as the trail's next segment."""

    run_id: str
    number: int  # 1 for the first segment
    previous_hash: str
    events: list[dict[str, Any]]


class AuditExport(WireModel):
    """The trail's end: its segments in the store (if any) and the events after them."""

    run_id: str
    events: list[dict[str, Any]]
    previous_hash: str = GENESIS_HASH
    segments: int = 0
    # The definition's retention (None: the worker's defaults); the export schedules the run's
    # data and trail for removal when a period applies (activities/retention_sweeping.py).
    retention: Retention | None = None


class EventValues(WireModel):
    """Variables an event set that are too large to record inline in the trail."""

    run_id: str
    seq: int  # the RUN_RESUMED event that refers to them
    values: dict[str, Any]
    sha256: str  # of `canonical_values(values)`: part of the object's key, checked on reading
    seal: SubjectSeal | None = None  # the run's data subject: the values are sealed with its key


def canonical_values(values: dict[str, Any]) -> bytes:
    """The one byte form of event variables that their size and hash are taken of."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def values_digest(values: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_values(values)).hexdigest()
