"""What the retention sweep workflow and its activity exchange: one batch asked for, its counts."""

from __future__ import annotations

from datetime import datetime

from dsmo.workflows.common.wire import WireModel

SWEEP_RETENTION = "sweep_retention"
RECORD_SWEEP = "record_sweep"
SWEEP_WORKFLOW = "DsmoRetentionSweep"
# Ended runs (or trails) one activity call removes at most: one call stays short, a sweep goes on.
SWEEP_BATCH = 200


class SweepBatch(WireModel):
    """Remove at most ``limit`` runs' data (then trails) due by ``as_of``."""

    as_of: datetime
    sweep_id: str = ""  # the sweep's workflow id: what its done records name
    limit: int = SWEEP_BATCH


class SweepCounts(WireModel):
    """What a sweep (or one batch of it) removed; each run and object counted once, even across retries.

    Attributes:
        runs: Ended runs whose stored objects and history were removed.
        objects: Stored objects removed with them.
        histories: Temporal executions deleted (none when retention of the namespace came first).
        trails: Audit trails removed.
        failed: Markers that could not be read, set aside in ``retention/failed/``.
        more: The batch stopped at its limit: more is due.
    """

    runs: int = 0
    objects: int = 0
    histories: int = 0
    trails: int = 0
    failed: int = 0
    more: bool = False

    def plus(self, other: SweepCounts) -> SweepCounts:
        return SweepCounts(
            runs=self.runs + other.runs,
            objects=self.objects + other.objects,
            histories=self.histories + other.histories,
            trails=self.trails + other.trails,
            failed=self.failed + other.failed,
            more=other.more,
        )


class SweepOutcome(WireModel):
    """A whole sweep: when it ran, as of when, what it removed (written to ``retention/sweeps/``)."""

    sweep_id: str
    as_of: datetime
    counts: SweepCounts
