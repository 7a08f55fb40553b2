"""`RetentionSweep`: removes what is due under the definitions' retention, started by a Temporal Schedule.

One sweep asks its activity for batches (`SWEEP_BATCH` runs or trails each) until nothing due is
left, as of the moment it started. A sweep with very much due continues as new every
`BATCHES_PER_GENERATION` batches, so its history stays short. At the end `record_sweep` counts
what it removed from the done records its batches wrote (exact even when an attempt died
halfway: activities/retention_sweeping.py), keeps the outcome in ``retention/sweeps/`` and
returns it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from dsmo.workflows.common.wire import WireModel
from dsmo.workflows.contracts.retention_io import (
    RECORD_SWEEP,
    SWEEP_RETENTION,
    SWEEP_WORKFLOW,
    SweepBatch,
    SweepCounts,
    SweepOutcome,
)

BATCHES_PER_GENERATION = 50
_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=1))


class SweepStart(WireModel):
    """A sweep's input: nothing from its schedule; what it carries when it continues as new."""

    as_of: datetime | None = None
    counts: SweepCounts = SweepCounts()


@workflow.defn(name=SWEEP_WORKFLOW)
class RetentionSweep:
    @workflow.run
    async def run(self, start: SweepStart) -> SweepOutcome:
        """Remove every ended run's data and trail due as of the sweep's start; return the counts."""
        as_of = start.as_of or workflow.now()
        sweep_id = workflow.info().workflow_id
        counts = start.counts
        for _ in range(BATCHES_PER_GENERATION):
            batch = await workflow.execute_activity(
                SWEEP_RETENTION,
                SweepBatch(as_of=as_of, sweep_id=sweep_id),
                result_type=SweepCounts,
                start_to_close_timeout=timedelta(minutes=10),
                retry_policy=_RETRY,
            )
            counts = counts.plus(batch)
            if not batch.more:
                break
        else:
            workflow.continue_as_new(SweepStart(as_of=as_of, counts=counts))
        # The attempts' own counts show progress; the outcome is counted from what the store holds.
        progress = SweepOutcome(sweep_id=sweep_id, as_of=as_of, counts=counts)
        outcome: SweepOutcome = await workflow.execute_activity(
            RECORD_SWEEP,
            progress,
            result_type=SweepOutcome,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=_RETRY,
        )
        return outcome
