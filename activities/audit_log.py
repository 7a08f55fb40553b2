"""The audit trail exported to `audit/{run_id}.jsonl`: one event per line, hash-chained.

Each line carries `prevHash` (the previous line's hash, or 64 zeros) and `hash` =
sha256(prevHash + the event's canonical JSON). Changing, removing or reordering any line
breaks the chain from that line on; `verify_trail` also compares the file with the run's own
trail in Temporal, so a rewritten chain is caught as well.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from dsmo.activities.artifacts import ArtifactStore
from dsmo.workflows.contracts import EXPORT_AUDIT, AuditExport

GENESIS = "0" * 64
# The Temporal run id of the execution that exported the file (object metadata).
EXECUTION_META = "workflow-run-id"


def audit_key(run_id: str) -> str:
    return f"audit/{run_id}.jsonl"


def _canonical(event: dict[str, Any]) -> str:
    return json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chain(events: list[dict[str, Any]]) -> bytes:
    lines, previous = [], GENESIS
    for event in events:
        digest = hashlib.sha256((previous + _canonical(event)).encode()).hexdigest()
        lines.append(_canonical({**event, "prevHash": previous, "hash": digest}))
        previous = digest
    return ("\n".join(lines) + "\n").encode()


@dataclass(frozen=True)
class Verification:
    ok: bool
    lines: int
    problem: str | None = None


def verify_lines(body: bytes, expected: list[dict[str, Any]] | None = None) -> Verification:
    """Check the chain line by line, and (given the run's trail) that the content matches it."""
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
        digest = hashlib.sha256((previous + _canonical(record)).encode()).hexdigest()
        if claimed != digest:
            return Verification(
                False, len(lines), f"line {number}: hash does not match its content (seq {record.get('seq')})"
            )
        if expected is not None and (number > len(expected) or _canonical(expected[number - 1]) != _canonical(record)):
            return Verification(False, len(lines), f"line {number}: differs from the run's own audit trail")
        previous = digest
    if expected is not None and len(expected) != len(lines):
        return Verification(False, len(lines), f"the file has {len(lines)} events, the run has {len(expected)}")
    return Verification(True, len(lines))


class AuditActivities:
    def __init__(self, store: ArtifactStore) -> None:
        self.store = store

    @activity.defn(name=EXPORT_AUDIT)
    def export_audit(self, export: AuditExport) -> str:
        """Write the chained trail once; a retry or a later export of a longer trail must extend it.

        One exception: a file written by this same workflow execution from a workflow task that
        never committed (the worker died between the export and the task's completion). Its last
        events were never in the history; the re-run task records them again with its own
        timestamps, and the history is the truth, so that file is replaced.
        """
        key = audit_key(export.run_id)
        body = chain(export.events)
        execution = activity.info().workflow_run_id or ""
        stored = self.store.put_json_bytes_once(
            key, body, content_type="application/x-ndjson", metadata={EXECUTION_META: execution}
        )
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
            ContentType="application/x-ndjson",
            Metadata={EXECUTION_META: execution, "sha256": hashlib.sha256(body).hexdigest()},
        )
        return stored.uri
