"""A run's audit trail as the store holds it: the export an ended run wrote, and the segments a
long-lived run writes as it goes, read by the client without asking a worker."""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from dsmo.activities.artifacts import ArtifactMissing, ArtifactStore
from dsmo.activities.audit_log import audit_key, read_segments, segment_key, unchained, verify_lines
from dsmo.activities.erasure_log import ErasureLog
from dsmo.activities.retention_markers import removed_trail_key
from dsmo.client.archive_bindings import is_run_object
from dsmo.workflows.contracts.run_records import ENDING_EVENTS, AuditEvent
from dsmo.workflows.contracts.trail_io import TrailHead

SEGMENTS_CACHED = 128  # parsed audit-trail segments a client keeps (each up to ~256 KB of events)


class TrailStore:
    """Reads trails from the artifact store; keeps the latest segments it parsed (they are write-once)."""

    def __init__(self, store: ArtifactStore) -> None:
        self.store = store
        self._segments: OrderedDict[tuple[str, int], list[AuditEvent]] = OrderedDict()

    def export(self, run_id: str) -> bytes | None:
        """The exported trail (`audit/{run_id}.jsonl`) as written, or None if there is none."""
        try:
            return self.store.read_bytes(self.store.uri(audit_key(run_id)))
        except ArtifactMissing:
            return None

    def missing_export(self, run_id: str) -> str:
        """Why a run has no exported trail: removed by retention (its sweep left a marker), or
        not written yet (a run exports its trail when it ends)."""
        removed = self.store.stored_or_none(removed_trail_key(run_id))
        if removed is None:
            return "it is written when the run ends"
        try:
            sweep = json.loads(removed).get("sweepId")
        except (ValueError, AttributeError):
            sweep = None
        return f"removed by retention{f', in sweep {sweep}' if sweep else ''}"

    def kept(self, run_id: str) -> bool:
        """Whether the store keeps a trail of a run with this id: its export, or the first
        segment of one that ended without exporting (terminated, say). At most two HEADs."""
        return self.store.exists(audit_key(run_id)) or self.store.exists(segment_key(run_id, 1))

    def exported_events(self, run_id: str) -> list[AuditEvent] | None:
        """The exported trail's events, or None if the run exported none."""
        body = self.export(run_id)
        return None if body is None else [AuditEvent.model_validate(event) for event in unchained(body)]

    @staticmethod
    def parse_lines(lines: list[bytes]) -> list[AuditEvent]:
        """The events of some chained lines of a trail (a page of it: only those are parsed)."""
        return [AuditEvent.model_validate(event) for event in unchained(b"\n".join(lines))]

    def segment_window(self, run_id: str, segments: int, stored: int, low: int, high: int) -> list[AuditEvent]:
        """The events with sequence numbers ``low + 1`` to ``high`` of a run's trail segments.

        Only the segments that hold them are read (each is write-once and kept): from the first
        segment forward, or, for a page nearer the end (``stored`` is the last stored event's
        sequence number), from the last segment back.
        """
        picked: list[list[AuditEvent]] = []
        if low < stored - high:
            for number in range(1, segments + 1):
                events = self._segment(run_id, number)
                if events and events[-1].seq > low:
                    picked.append(events)
                if events and events[-1].seq >= high:
                    break
        else:
            for number in range(segments, 0, -1):
                events = self._segment(run_id, number)
                if events and events[0].seq <= high:
                    picked.insert(0, events)
                if events and events[0].seq <= low + 1:
                    break
        return [event for events in picked for event in events if low < event.seq <= high]

    def _segment(self, run_id: str, number: int) -> list[AuditEvent]:
        key = (run_id, number)
        if key not in self._segments:
            body = read_segments(self.store, run_id, number, first=number)
            self._segments[key] = [AuditEvent.model_validate(event) for event in unchained(body)]
            while len(self._segments) > SEGMENTS_CACHED:
                self._segments.popitem(last=False)
        self._segments.move_to_end(key)
        return self._segments[key]

    def stored_head(self, run_id: str) -> TrailHead | None:
        """Where the run's segments in the store end (their last event and its chain hash), read
        from the segments themselves; None when it wrote none. Segments are write-once: an export
        must hold them, unchanged, as its first lines."""
        prefix = segment_key(run_id, 1).rsplit("/", 1)[0] + "/"
        count = sum(1 for uri in self.store.list_uris(prefix) if uri.endswith(".jsonl"))
        lines = read_segments(self.store, run_id, count).splitlines() if count else []
        if not lines:
            return None
        last = json.loads(lines[-1])
        return TrailHead(seq=len(lines), hash=str(last.get("hash")), segments=count)

    def segment_events(self, run_id: str, segments: int) -> list[AuditEvent]:
        """The events a long-lived run has written to its trail's segments in the store.

        Segments are write-once, so each is read once and kept (the latest `SEGMENTS_CACHED`):
        following a long run (the console's run page) reads only the segments written since.
        """
        return [event for number in range(1, segments + 1) for event in self._segment(run_id, number)]


@dataclass(frozen=True)
class TrailVerification:
    """What `DsmoClient.verify_trail` found.

    Attributes:
        ok: The hash chain is intact (and, if compared, the content matches the run's trail).
        lines: The number of events in the export.
        problem: The first problem found, naming its line.
        compared: The export was compared with the run's own trail (False when the run no longer
            answers: only the chain was checked).
        erased: The artifacts the trail refers to that can no longer be read: the run's data
            subject was erased (the trail still proves what happened, by their hashes).
        erasure: The erasure log's record of that subject's erasure, if any.
    """

    ok: bool
    lines: int
    problem: str | None
    compared: bool
    erased: list[str] = field(default_factory=list)
    erasure: dict[str, Any] | None = None


def verify_export(body: bytes, trail: list[AuditEvent] | None, head: TrailHead | None) -> TrailVerification:
    """Check an exported trail's hash chain and, given the run's own trail and head, that it matches."""
    expected = None if trail is None else [event.model_dump(mode="json") for event in trail]
    result = verify_lines(body, expected, head)
    return TrailVerification(result.ok, result.lines, result.problem, compared=trail is not None)


def cut_short(body: bytes) -> bool:
    """Whether a run's exported trail lacks the ending it was written after: an export is written
    as the run settles the ending it recorded (`RUN_COMPLETED`, `RUN_ABORTED`), so one without it
    was cut short since."""
    return not any(event.get("type") in ENDING_EVENTS for event in unchained(body))


def erased_artifacts(store: ArtifactStore, body: bytes) -> tuple[list[str], dict[str, Any] | None]:
    """The artifacts an exported trail refers to that its subject's erasure made unreadable, and
    the erasure's record; nothing when the run has no subject or the subject was not erased."""
    events = unchained(body)
    created = events[0].get("data", {}) if events else {}
    if not subject_erased(store, created):
        return [], None
    records = ErasureLog(store).touching(str(created["subject"]))
    # The run's own data (input, outputs, large event values, documents), not the config snapshot it names.
    uris = sorted({str(uri) for event in events for uri in event.get("artifactUris") or () if is_run_object(str(uri))})
    return uris, erasure_of(records, str(created.get("runId") or events[0].get("runId")), created.get("subjectKey"))


def erasure_of(records: list[dict[str, Any]], run_id: str, key_id: Any) -> dict[str, Any] | None:
    """The erasure record that erased this run: the one destroying the key its data was sealed
    with, else one listing it, else the subject's first (a later erasure of the same subject, for
    runs started since, did not erase this one)."""
    for record in records:
        if key_id is not None and key_id in (record.get("keysDestroyed") or ()):
            return record
    listing = [record for record in records if run_id in (record.get("runs") or ())]
    return next(iter(listing or records), None)


def subject_erased(store: ArtifactStore, created: dict[str, Any]) -> bool:
    """Whether the run whose ``RUN_CREATED`` data this is had a data subject since erased.

    A later key of the same subject (a run after the erasure) does not open the run's objects.
    """
    subject = created.get("subject")
    if not isinstance(subject, str):
        return False
    key = store.subjects.record(subject)
    return key is None or key.get("keyId") != created.get("subjectKey")
