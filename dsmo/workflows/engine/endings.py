"""How a run ends: the terminal record, mirrored to Temporal's own run status.

COMPLETED returns the record as the workflow result. FAILED and TIMEOUT unwind the saga and end
the workflow Failed, CANCELLED unwinds it and ends it Cancelled, both with the record as the
failure's details. Every ending gives back the concurrency slot and exports the audit trail.
"""

from __future__ import annotations

import json

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError

from dsmo.workflows.changes.rewind_point import abandon as rewind_abandon
from dsmo.workflows.changes.run_migration import no_more_boundaries
from dsmo.workflows.common import patches
from dsmo.workflows.common.identifiers import run_id_problem
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.run_records import ExecutionResult
from dsmo.workflows.contracts.trail_io import AuditExport
from dsmo.workflows.engine.beginning import STRICT_RUN_ID_PATCH, slot_call
from dsmo.workflows.run.activity_calls import ActivityFailed
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import RunEnded
from dsmo.workflows.run.decided_ending import past_a_cancel
from dsmo.workflows.run.flow_slots import SIGNALLED_RELEASE_PATCH, give_back_all, give_back_late, hand_on_deliveries
from dsmo.workflows.run.intake import drop_all
from dsmo.workflows.run.service_budgets import BUDGETS, call_service, record_service_failure
from dsmo.workflows.run.state import say_ending
from dsmo.workflows.saga.compensation_stack import unwind

CANCEL_REASON_DEFAULT = "cancellation requested through Temporal"


def begin_ending(run: Run, status: RunStatus) -> None:
    """The run is ending in ``status``: it says so at once, before anything is awaited (`say_ending`)."""
    say_ending(run.state, status)


async def finish_completed(run: Run) -> ExecutionResult:
    """The run reached the end of its graph."""
    state = run.state
    state.current_node = None
    result = ExecutionResult(
        run_id=state.run_id,
        status=RunStatus.COMPLETED,
        completed_at=workflow.now(),
        result_type="success",
        result_summary="Flow completed successfully",
        path=list(state.path),
        variables=state.variables,
    )
    await _settle(run, result)
    workflow.logger.info("Execution %s completed with result: success", state.run_id)
    if run.request.parent_run_id:
        workflow.logger.info("Emitting AGENT_COMPLETED event to %s", run.request.parent_run_id)
    return result


async def finish_early(run: Run, ended: RunEnded) -> ExecutionResult:
    """A node ended the run FAILED or TIMEOUT: unwind, settle, and fail the workflow with the record."""
    state = run.state
    begin_ending(run, ended.status)
    timeout = ended.status is RunStatus.TIMEOUT
    compensation = await unwind(run, "timeout" if timeout else "failed")
    result = ExecutionResult(
        run_id=state.run_id,
        status=ended.status,
        completed_at=workflow.now(),
        result_type="timeout" if timeout else "failure",
        result_summary=ended.message if timeout else None,
        error_message=None if timeout else ended.message,
        failed_action_id=ended.node,
        compensation=compensation,
        path=list(state.path),
        variables=state.variables,
    )
    await _settle(run, result)
    workflow.logger.info("Execution %s ended %s: %s", state.run_id, ended.status, ended.message)
    # Failed and timed-out runs end as Failed in Temporal too, carrying the terminal record.
    raise ApplicationError(
        ended.message,
        result.model_dump(mode="json"),
        type="AgentExecutionTimeout" if timeout else "AgentExecutionFailed",
        non_retryable=True,
    )


async def finish_cancelled(run: Run) -> ExecutionResult:
    """The run was cancelled: unwind, settle, and end the workflow Cancelled with the record."""
    state = run.state
    begin_ending(run, RunStatus.CANCELLED)
    by, reason = _cancellation(workflow.cancellation_reason())
    compensation = await unwind(run, "cancelled")
    result = ExecutionResult(
        run_id=state.run_id,
        status=RunStatus.CANCELLED,
        completed_at=workflow.now(),
        result_type="cancelled",
        cancelled_by=by,
        cancel_reason=reason,
        compensation=compensation,
        failed_action_id=state.current_node,
        path=list(state.path),
        variables=state.variables,
    )
    await _settle(run, result)
    workflow.logger.info("Execution %s cancelled by %s: %s", state.run_id, by, reason)
    raise CancelledError(f"cancelled by {by}: {reason}", result.model_dump(mode="json"))


async def finish_cancelled_handing_over(run: Run, ended_first: str) -> ExecutionResult:
    """Cancelled while handing over to the next generation: the hand-over is dropped and the run
    ends cancelled as the run it is (a `migrate` still waiting for a boundary hears ``ended_first``)."""
    begin_ending(run, RunStatus.CANCELLED)  # from here on it takes no request
    await no_more_boundaries(run, ended_first)
    # A rewind's undo (its update handler) runs to its end and is recorded first: the steps it
    # undid are off the stack, and the cancel undoes the rest, each once.
    await workflow.wait_condition(workflow.all_handlers_finished)
    run.rewind = run.migration = None
    run.continuing = False
    rewind_abandon(run)
    return await finish_cancelled(run)


async def _settle(run: Run, result: ExecutionResult) -> None:
    await past_a_cancel(run, lambda: _settle_as_decided(run, result))


async def _settle_as_decided(run: Run, result: ExecutionResult) -> None:
    state = run.state
    # Messages another start delivered here (onBusy: deliver) and never taken go on to new runs;
    # a replay (or a fork still re-reading its record) hands on nothing: it starts no run.
    drop_all(run, f"the run ended ({result.status.value})", await hand_on_deliveries(run))
    state.result = result
    state.enter(result.status)
    state.audit.record(
        "RUN_COMPLETED" if result.status is RunStatus.COMPLETED else "RUN_ABORTED",
        at=result.completed_at,
        stage=result.failed_action_id,
        data={
            "status": result.status.value,
            "resultType": result.result_type,
            # Who cancelled and why, in the trail itself (also in the run's record).
            **({"cancelledBy": result.cancelled_by} if result.cancelled_by else {}),
            **({"cancelReason": result.cancel_reason} if result.cancel_reason else {}),
        },
    )
    if run.slot_held:
        await slot_call(run, contracts.RELEASE_SLOT, 1)
    # A run that ends in line leaves it (runs from before then were dropped when their turn came).
    if run.slots_held or (run.slot_asked and patches.patched(SIGNALLED_RELEASE_PATCH)):
        await give_back_all(run)
    await _export_audit(run)
    # In-flight update handlers would be lost if the run returned under them.
    await workflow.wait_condition(workflow.all_handlers_finished)
    # A run was told to wait for a slot this run left without a word, after it decided to: give it back.
    while await give_back_late(run):
        await workflow.wait_condition(workflow.all_handlers_finished)


async def _export_audit(run: Run) -> None:
    """Append-only copy of the trail in the object store, hash-chained (`dsmo audit verify`)."""
    state = run.state
    if run_id_problem(state.run_id) and patches.patched(STRICT_RUN_ID_PATCH):
        return  # no object key can be built from the id; the trail stays in the history
    trail = state.audit
    events = [event.model_dump(mode="json") for event in trail.events]
    export = AuditExport(
        run_id=state.run_id,
        events=events,
        previous_hash=trail.head.hash,
        segments=trail.head.segments,
        retention=run.definition.retention,
    )
    try:
        # Local: the export is one put at the very end; a task-queue round trip would add latency.
        await call_service(contracts.EXPORT_AUDIT, export, result_type=str, local=True, cancellation_is_failure=True)
    except ActivityFailed as failed:
        # The trail in the run's history (the `events` query) still has every event.
        stage = state.result.failed_action_id if state.result else None
        record_service_failure(state, BUDGETS[contracts.EXPORT_AUDIT], failed.error, stage=stage)
        workflow.logger.warning("audit export failed for %s: %s", state.run_id, failed.message)


def _cancellation(reason: str | None) -> tuple[str, str]:
    """`dsmo cancel` sends {"cancelledBy", "cancelReason"} as the reason; anything else is the system's."""
    if reason:
        try:
            data = json.loads(reason)
        except ValueError:
            return "system", reason
        if isinstance(data, dict):
            return str(data.get("cancelledBy") or "system"), str(data.get("cancelReason") or CANCEL_REASON_DEFAULT)
    return "system", CANCEL_REASON_DEFAULT
