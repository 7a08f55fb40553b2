"""The erasure log: one write-once object per erased subject, hash-chained like an audit trail.

``erasures/{seq:09d}.jsonl`` holds one line: the record (which subject by its fingerprint, when,
who, why, which runs) with ``prevHash`` and ``hash`` chained from the record before it, as
`audit_log.chained` does for a trail. A record is never rewritten; `verify` checks the chain
whole, so a record changed, removed or reordered is found. Two erasures at once both land: the
one that loses the race for a number takes the next.
"""

from __future__ import annotations

import json
from typing import Any

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.audit_log import GENESIS, Verification, chained, verify_lines
from dsmo.workflows.common.errors import DsmoError

ERASURES_PREFIX = "erasures/"


def erasure_key(seq: int) -> str:
    return f"{ERASURES_PREFIX}{seq:09d}.jsonl"


class ErasureLog:
    """The deployment's erasure log in the artifact store."""

    def __init__(self, store: ArtifactStore) -> None:
        self.store = store

    def body(self) -> bytes:
        """Every record's line, in order: the chain as `verify_lines` reads it."""
        keys = [self.store.key_of(uri)[1] for uri in self.store.list_uris(ERASURES_PREFIX)]
        return b"".join(self.store.stored_or_none(key) or b"" for key in sorted(keys))

    def records(self) -> list[dict[str, Any]]:
        """Every record, oldest first, with its chain fields."""
        return [json.loads(line) for line in self.body().decode().splitlines() if line.strip()]

    def verify(self) -> Verification:
        """Check the chain from the first record to the last."""
        return verify_lines(self.body())

    def touching(self, fingerprint: str) -> list[dict[str, Any]]:
        """The records that erased the subject with this fingerprint."""
        return [record for record in self.records() if record.get("subject") == fingerprint]

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Add ``record`` as the next entry (its ``seq`` is set here); returns it as chained."""
        for _ in range(100):  # each loss means another erasure landed: a bound, not a wait
            existing = self.records()
            seq = int(existing[-1]["seq"]) + 1 if existing else 1
            previous = str(existing[-1]["hash"]) if existing else GENESIS
            line, _ = chained([{**record, "seq": seq}], previous)
            if self.store.put_if_absent(erasure_key(seq), line, "application/x-ndjson"):
                chained_record: dict[str, Any] = json.loads(line)
                return chained_record
        raise DsmoError("erasure log: it kept moving while this record was appended; erase again")
