"""`RetentionSweep`: removes what is due under the definitions' retention, started by a Temporal Schedule.

One sweep asks its activity for batches (`SWEEP_BATCH` runs or trails each) until nothing due is
left, as of the moment it started; every batch's counts are exact even when an activity attempt
dies halfway (activities/retention_sweeping.py). A sweep with very much due continues as new
every `BATCHES_PER_GENERATION` batches, carrying its counts, so its history stays short. At the
end it writes its outcome to the store (``retention/sweeps/``) and returns it.
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
        counts = start.counts
        for _ in range(BATCHES_PER_GENERATION):
            batch = await workflow.execute_activity(
                SWEEP_RETENTION,
                SweepBatch(as_of=as_of),
                result_type=SweepCounts,
                start_to_close_timeout=timedelta(minutes=10),
                retry_policy=_RETRY,
            )
            counts = counts.plus(batch)
            if not batch.more:
                break
        else:
            workflow.continue_as_new(SweepStart(as_of=as_of, counts=counts))
        outcome = SweepOutcome(sweep_id=workflow.info().workflow_id, as_of=as_of, counts=counts)
        await workflow.execute_activity(
            RECORD_SWEEP, outcome, result_type=str, start_to_close_timeout=timedelta(minutes=1), retry_policy=_RETRY
        )
        return outcome
