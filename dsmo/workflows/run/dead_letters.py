"""Dead letters: what cannot succeed is written to `dlq/{run_id}/{stage}.json`, to reprocess later.

A stage that failed for good, and a run whose infrastructure budget ran out before its first
node, leave one; `dsmo dlq list` shows them and `dsmo dlq redrive` starts them again.

A replay or what-if (and a fork or rewind while it re-executes its record, before the node it
goes live at) writes none: a letter can be redriven, and a redrive is a live run that acts (it
sends messages, runs saga actions) for a run that was only ever a re-reading of the record, or
of a candidate version never published. It records `DEAD_LETTER_SKIPPED` instead, with what the
letter would have said. A fork, once live, is a run of its own and dead-letters as any run.
"""

from __future__ import annotations

from temporalio import workflow

from dsmo.workflows.common import patches
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.run.activity_calls import ActivityFailed
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import RunEnded, ServiceFailed
from dsmo.workflows.run.decided_ending import past_a_cancel
from dsmo.workflows.run.service_budgets import BUDGETS, call_service, record_service_failure

# workflow.patched id: a replay records the dead letter it would have written instead of writing
# it. Replays started before it wrote one, and must replay as they ran.
REPLAY_NO_DEAD_LETTER_PATCH = "replay-no-dead-letter"


async def write_dead_letter(run: Run, letter: contracts.DeadLetter) -> None:
    """Write it, recorded as DEAD_LETTERED; a store that stays down is recorded and logged.

    A replay (see the module's docstring) writes nothing and records DEAD_LETTER_SKIPPED.
    """
    state = run.state
    plan = run.replay
    if plan is not None and patches.patched(REPLAY_NO_DEAD_LETTER_PATCH):
        state.audit.record(
            "DEAD_LETTER_SKIPPED",
            at=workflow.now(),
            stage=letter.stage,
            data={
                "errorType": letter.error_type,
                "attempts": letter.attempts,
                "replayOf": plan.of,
                "reason": "a replay writes no dead letter: nothing it leaves may act",
            },
        )
        return
    try:
        uri = await call_service(contracts.WRITE_DEAD_LETTER, letter, result_type=str)
        state.audit.record(
            "DEAD_LETTERED",
            at=workflow.now(),
            stage=letter.stage,
            artifact_uris=[uri],
            data={"errorType": letter.error_type, "attempts": letter.attempts},
        )
    except ActivityFailed as failed:
        record_service_failure(state, BUDGETS[contracts.WRITE_DEAD_LETTER], failed.error, stage=letter.stage)
        workflow.logger.warning("dead letter for %s/%s not written: %s", state.run_id, letter.stage, failed.message)


async def service_failed(run: Run, failed: ServiceFailed) -> RunEnded:
    """A spent budget before the first node: record it, dead-letter the run at its start node."""
    state = run.state
    start = run.request.start_at or run.definition.start
    if state.status is RunStatus.PENDING:  # it never got its slot: it ran, and failed, all the same
        state.enter(RunStatus.RUNNING)
    letter = contracts.DeadLetter(
        run_id=state.run_id,
        stage=start,
        agent="",
        service=failed.activity,
        workflow_version=state.workflow_version,
        config_ref=state.config_ref,
        correlation_id=run.correlation_id,
        idempotency_key=contracts.idempotency_key(state.run_id, failed.activity, state.workflow_version),
        attempts=0,
        error_type="ServiceBudgetSpent",
        errors=[failed.message],
        variables=state.variables,
        task_queue=workflow.info().task_queue,
        created_at=workflow.now(),
        seal=run.seal,
    )
    # The run has decided to fail: a cancel meanwhile must not leave it ended with no record.
    await past_a_cancel(run, lambda: write_dead_letter(run, letter))
    return RunEnded(RunStatus.FAILED, start, failed.message)
