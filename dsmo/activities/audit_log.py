"""The audit trail in the store: one event per line, hash-chained, written once.

Each line carries `prevHash` (the previous line's hash, or 64 zeros) and `hash` =
sha256(prevHash + the event's canonical JSON). Changing, removing or reordering any line
breaks the chain from that line on; `verify_lines` also compares the lines with the run's own
trail in Temporal, so a rewritten chain is caught as well.

A run that continues as new writes each generation's events as a segment
(`audit/{run_id}/segments/{n}.jsonl`), chained from the last hash of the one before; when the
run ends, `audit/{run_id}.jsonl` holds the whole trail: the segments' lines, then the rest.
Variables an event set that are too large to record inline are kept at
`events/{run_id}/{seq}-{sha256 prefix}.json`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.retention_markers import schedule_removal
from dsmo.workflows.contracts.activity_io import EXPORT_AUDIT, STORE_EVENT_VALUES, WRITE_AUDIT_SEGMENT
from dsmo.workflows.contracts.trail_io import (
    GENESIS_HASH,
    AuditExport,
    AuditSegment,
    EventValues,
    TrailHead,
    canonical_values,
    values_digest,
)
from dsmo.workflows.definition.retention import Retention

GENESIS = GENESIS_HASH
# The Temporal run id of the execution that exported the file (object metadata).
EXECUTION_META = "workflow-run-id"
JSONL = "application/x-ndjson"


def audit_key(run_id: str) -> str:
    return f"audit/{run_id}.jsonl"


def segment_key(run_id: str, number: int) -> str:
    return f"audit/{run_id}/segments/{number:06d}.jsonl"


def event_values_key(run_id: str, seq: int, digest: str) -> str:
    return f"events/{run_id}/{seq:09d}-{digest[:16]}.json"


def line_hash(previous: str, event: dict[str, Any]) -> str:
    """The chain hash of ``event`` following a line whose hash is ``previous``."""
    return hashlib.sha256((previous + _canonical(event)).encode()).hexdigest()


def _canonical(event: dict[str, Any]) -> str:
    return json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chained(events: Iterable[dict[str, Any]], previous: str = GENESIS) -> tuple[bytes, str]:
    """The events as chained lines from ``previous``, and the last line's hash."""
    lines = []
    for event in events:
        digest = line_hash(previous, event)
        lines.append(_canonical({**event, "prevHash": previous, "hash": digest}))
        previous = digest
    return ("".join(line + "\n" for line in lines)).encode(), previous


def chain(events: list[dict[str, Any]]) -> bytes:
    """A whole trail as chained lines, from the genesis hash."""
    return chained(events)[0]


def unchained(body: bytes) -> list[dict[str, Any]]:
    """The events of chained lines, without their hashes (the run's own form of them)."""
    events = []
    for line in body.decode().splitlines():
        record = json.loads(line)
        record.pop("hash", None)
        record.pop("prevHash", None)
        events.append(record)
    return events


@dataclass(frozen=True)
class Verification:
    ok: bool
    lines: int
    problem: str | None = None


def verify_lines(
    body: bytes, expected: list[dict[str, Any]] | None = None, head: TrailHead | None = None
) -> Verification:
    """Check the chain line by line, and (given the run's trail) that the content matches it.

    ``head``: where the run's segments end by Temporal's own record. The expected events of a
    long run come partly from those segments, so a consistent rewrite of the file and the
    segments is caught here: the chain must pass through the head's hash.
    """
    previous = GENESIS
    lines = body.decode(errors="replace").splitlines()
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except ValueError:
            return Verification(False, len(lines), f"line {number}: not JSON")
        claimed, prev = record.pop("hash", None), record.pop("prevHash", None)
        if prev != previous:
            return Verification(False, len(lines), f"line {number}: prevHash does not match line {number - 1}")
        digest = line_hash(previous, record)
        if claimed != digest:
            return Verification(
                False, len(lines), f"line {number}: hash does not match its content (seq {record.get('seq')})"
            )
        if expected is not None and (number > len(expected) or _canonical(expected[number - 1]) != _canonical(record)):
            return Verification(False, len(lines), f"line {number}: differs from the run's own audit trail")
        if head is not None and number == head.seq and digest != head.hash:
            return Verification(False, len(lines), f"line {number}: hash differs from the run's own head in Temporal")
        previous = digest
    if head is not None and head.seq > len(lines):
        return Verification(False, len(lines), f"the file has {len(lines)} events, the run's segments {head.seq}")
    if expected is not None and len(expected) != len(lines):
        return Verification(False, len(lines), f"the file has {len(lines)} events, the run has {len(expected)}")
    return Verification(True, len(lines))


def read_segments(store: ArtifactStore, run_id: str, count: int, *, first: int = 1) -> bytes:
    """The chained lines of a run's trail segments ``first`` to ``count``, in order."""
    return b"".join(store.read_bytes(store.uri(segment_key(run_id, number))) for number in range(first, count + 1))


def _last_hash(body: bytes) -> str:
    lines = body.rstrip(b"\n").rsplit(b"\n", 1)
    return str(json.loads(lines[-1]).get("hash")) if body.strip() else GENESIS


class AuditActivities:
    def __init__(self, store: ArtifactStore, *, retention_defaults: Retention | None = None) -> None:
        self.store = store
        # Periods a definition leaves out (the worker's DSMO_RETENTION_* settings).
        self.retention_defaults = retention_defaults or Retention()

    @activity.defn(name=EXPORT_AUDIT)
    async def export_audit(self, export: AuditExport) -> str:
        """Write the whole chained trail once: the run's segments, then the events after them.

        A retry or a later export of a longer trail must extend the file. One exception: a file
        written by this same workflow execution from a workflow task that never committed (the
        worker died between the export and the task's completion). Its last events were never in
        the history; the re-run task records them again with its own timestamps, and the history
        is the truth, so that file is replaced.

        Every run ends with this call, so its usual case (no segments, no file yet) is one put
        from the event loop; the rest goes to a thread (a hop costs more than the put itself).
        """
        if not export.segments:
            body = self._body(export, b"")
            execution = activity.info().workflow_run_id or ""
            key = audit_key(export.run_id)
            if await self.store.put_new_async(key, body, JSONL, {EXECUTION_META: execution}):
                if (policy := self._removal_policy(export)) is not None:
                    await asyncio.to_thread(self._schedule_removal, export, body, policy)
                return self.store.uri(key)
        return await asyncio.to_thread(self._export, export)

    def _export(self, export: AuditExport) -> str:
        earlier = read_segments(self.store, export.run_id, export.segments) if export.segments else b""
        body = self._body(export, earlier)
        uri = self._write_once(audit_key(export.run_id), body)
        if (policy := self._removal_policy(export)) is not None:
            self._schedule_removal(export, body, policy)
        return uri

    @staticmethod
    def _body(export: AuditExport, earlier: bytes) -> bytes:
        if _last_hash(earlier) != export.previous_hash:
            raise ApplicationError(
                f"the audit segments of {export.run_id} do not end at the run's head ({export.previous_hash[:12]})",
                type="AuditConflict",
                non_retryable=True,
            )
        return earlier + chained(export.events, export.previous_hash)[0]

    def _removal_policy(self, export: AuditExport) -> Retention | None:
        """The run's retention (the worker's defaults filling in), if it removes anything."""
        policy = (export.retention or Retention()).merged(self.retention_defaults)
        return policy if (policy.ended or policy.trail) and export.events else None

    def _schedule_removal(self, export: AuditExport, body: bytes, policy: Retention) -> None:
        # Due from the run's end as its trail records it: a retried export schedules the same marker.
        ended_at = datetime.fromisoformat(str(export.events[-1]["at"]))
        versions = sorted({str(event["workflowVersion"]) for event in unchained(body) if "workflowVersion" in event})
        schedule_removal(self.store, export.run_id, versions, policy, ended_at)

    @activity.defn(name=WRITE_AUDIT_SEGMENT)
    def write_audit_segment(self, segment: AuditSegment) -> TrailHead:
        """Write one generation's events as the trail's next segment; returns the new head."""
        body, last = chained(segment.events, segment.previous_hash)
        self._write_once(segment_key(segment.run_id, segment.number), body)
        return TrailHead(seq=int(segment.events[-1]["seq"]), hash=last, segments=segment.number)

    @activity.defn(name=STORE_EVENT_VALUES)
    def store_event_values(self, values: EventValues) -> str:
        """Keep variables an event set that are too large for the trail; returns their URI."""
        if values_digest(values.values) != values.sha256:
            raise ApplicationError("event values do not match their sha256", type="AuditConflict", non_retryable=True)
        key = event_values_key(values.run_id, values.seq, values.sha256)
        stored = self.store.put_json_bytes_once(key, canonical_values(values.values), seal=values.seal)
        if not stored.matches:
            # Another execution under this run id (a reset, an id reused after retention) wrote it.
            raise ApplicationError(
                f"{stored.uri} exists with other values; refusing to refer to it",
                type="AuditConflict",
                non_retryable=True,
            )
        return stored.uri

    def _write_once(self, key: str, body: bytes) -> str:
        execution = activity.info().workflow_run_id or ""
        stored = self.store.put_json_bytes_once(key, body, content_type=JSONL, metadata={EXECUTION_META: execution})
        if stored.created:
            return stored.uri
        existing = self.store.read_bytes(stored.uri)
        if existing == body:
            return stored.uri
        if not body.startswith(existing):
            if not execution or self.store.metadata(key).get(EXECUTION_META) != execution:
                # Non-retryable: retrying cannot change the file, and the run must still end.
                raise ApplicationError(
                    f"{stored.uri} exists with other content; refusing to rewrite an audit trail",
                    type="AuditConflict",
                    non_retryable=True,
                )
            activity.logger.warning("replacing %s: written by a workflow task that never committed", stored.uri)
        self.store.s3.put_object(
            Bucket=self.store.bucket,
            Key=key,
            Body=body,
            ContentType=JSONL,
            Metadata={EXECUTION_META: execution, "sha256": hashlib.sha256(body).hexdigest()},
        )
        return stored.uri
