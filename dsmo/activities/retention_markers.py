"""Retention markers: an ended run's data and trail scheduled for removal, by due time.

Keys sort by due time (``YYYYmmddTHHMM``), so a sweep (activities/retention_sweeping.py) reads only as
far as what is due. Written when a run's trail is exported, at its end.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from dsmo.activities.artifacts import ArtifactStore
from dsmo.workflows.definition.retention import Retention

ENDED_PREFIX = "retention/ended/"
TRAILS_PREFIX = "retention/trails/"
SWEEPS_PREFIX = "retention/sweeps/"


DONE_PREFIX = "retention/done/"
FAILED_PREFIX = "retention/failed/"


# A run whose trail a sweep removed: ``{sweepId}``, kept so `dsmo audit verify` can say why there is no trail.
REMOVED_TRAILS_PREFIX = "retention/removed-trails/"


def removed_trail_key(run_id: str) -> str:
    return f"{REMOVED_TRAILS_PREFIX}{run_id}.json"


def due_key(prefix: str, due: datetime, run_id: str) -> str:
    """The marker's key: its due time rounded up to the minute (never removed early)."""
    due = due.astimezone(UTC)
    if due.second or due.microsecond:
        due = due.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return f"{prefix}{due:%Y%m%dT%H%M}/{run_id}.json"


def run_prefixes(run_id: str, versions: list[str]) -> list[str]:
    """Where a run's own objects live (its trail is removed on its own schedule)."""
    return [
        *(f"artifacts/{version}/{run_id}/" for version in versions),
        f"dlq/{run_id}/",
        f"events/{run_id}/",
        f"uploads/{run_id}/",
        f"deliveries/{run_id}/",  # starts delivered to it (onBusy: deliver): their input and messages
    ]


def schedule_removal(
    store: ArtifactStore, run_id: str, versions: list[str], policy: Retention, ended_at: datetime
) -> str | None:
    """Write the marker that makes a sweep remove the run's data (or trail) when due; returns its key."""
    trail_due = (ended_at + policy.trail).isoformat() if policy.trail else None
    if policy.ended is not None:
        key = due_key(ENDED_PREFIX, ended_at + policy.ended, run_id)
        marker = {"runId": run_id, "versions": versions, "trailDue": trail_due, "endedAt": ended_at.isoformat()}
    elif policy.trail is not None:
        key, marker = due_key(TRAILS_PREFIX, ended_at + policy.trail, run_id), {"runId": run_id}
    else:
        return None
    store.put_if_absent(key, json.dumps(marker).encode())
    return key
