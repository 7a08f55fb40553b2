"""How a run ends: the seed's terminal records, mirrored to Temporal's own run status."""

from __future__ import annotations

import json

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from workflows import contracts
    from workflows.actions import failure_message, raise_if_cancelled
    from workflows.control import RunEnded, ServiceFailed
    from workflows.identifiers import run_id_problem
    from workflows.records import ExecutionRequest, ExecutionResult
    from workflows.run_state import RunState
    from workflows.saga import SagaActions
    from workflows.service_budgets import ATTEMPT_TIMEOUT, BUDGETS, record_service_failure
    from workflows.status import RunStatus

CANCEL_REASON_DEFAULT = "cancellation requested through Temporal"
# workflow.patched id: a run started with an id that is not a run id (around DSMO's checks) ends
# at once and writes nothing; the marker is written only by such runs.
STRICT_RUN_ID_PATCH = "strict-run-id"


class RunEndings(SagaActions):
    """Mixed into AgentExecution: COMPLETED, FAILED, TIMEOUT and CANCELLED endings (unwinding the saga)."""

    _state: RunState
    _request: ExecutionRequest
    _slot_held: bool

    async def _finish_completed(self) -> ExecutionResult:
        state = self._state
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
        await self._settle(result)
        workflow.logger.info("Execution %s completed with result: success", state.run_id)
        if self._request.parent_run_id:
            workflow.logger.info("Emitting AGENT_COMPLETED event to %s", self._request.parent_run_id)
        return result

    async def _finish_early(self, ended: RunEnded) -> ExecutionResult:
        state = self._state
        timeout = ended.status is RunStatus.TIMEOUT
        compensation = await self._unwind("timeout" if timeout else "failed")
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
        await self._settle(result)
        workflow.logger.info("Execution %s ended %s: %s", state.run_id, ended.status, ended.message)
        # Failed and timed-out runs end as Failed in Temporal too, carrying the seed's record.
        raise ApplicationError(
            ended.message,
            result.model_dump(mode="json"),
            type="AgentExecutionTimeout" if timeout else "AgentExecutionFailed",
            non_retryable=True,
        )

    async def _finish_cancelled(self) -> ExecutionResult:
        state = self._state
        by, reason = _cancellation(workflow.cancellation_reason())
        compensation = await self._unwind("cancelled")
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
        await self._settle(result)
        workflow.logger.info("Execution %s cancelled by %s: %s", state.run_id, by, reason)
        raise CancelledError(f"cancelled by {by}: {reason}", result.model_dump(mode="json"))

    async def _settle(self, result: ExecutionResult) -> None:
        state = self._state
        state.result = result
        state.enter(result.status)
        state.audit.record(
            "RUN_COMPLETED" if result.status is RunStatus.COMPLETED else "RUN_ABORTED",
            at=result.completed_at,
            stage=result.failed_action_id,
            data={"status": result.status.value, "resultType": result.result_type},
        )
        if self._slot_held:
            await self._slot_activity(contracts.RELEASE_SLOT, 1)
        await self._export_audit()
        # In-flight update handlers would be lost if the run returned under them.
        await workflow.wait_condition(workflow.all_handlers_finished)

    async def _export_audit(self) -> None:
        """Append-only copy of the trail in the object store, hash-chained (`dsmo audit verify`)."""
        state = self._state
        if run_id_problem(state.run_id) and workflow.patched(STRICT_RUN_ID_PATCH):
            return  # no object key can be built from the id; the trail stays in the history
        events = [event.model_dump(mode="json") for event in state.audit.events]
        budget = BUDGETS[contracts.EXPORT_AUDIT]
        try:
            # Local: the export is one put at the very end; a task-queue round trip would add latency.
            await workflow.execute_local_activity(
                contracts.EXPORT_AUDIT,
                contracts.AuditExport(run_id=state.run_id, events=events),
                result_type=str,
                start_to_close_timeout=ATTEMPT_TIMEOUT,
                schedule_to_close_timeout=budget.total,
                retry_policy=budget.retry_policy,
            )
        except ActivityError as err:
            # The trail in the run's history (the `events` query) still has every event.
            record_service_failure(state, budget, err, stage=state.result.failed_action_id if state.result else None)
            workflow.logger.warning("audit export failed for %s: %s", state.run_id, failure_message(err))

    async def _slot_activity(self, name: str, max_concurrent: int) -> None:
        budget = BUDGETS[name]
        try:
            await workflow.execute_activity(
                name,
                contracts.SlotRequest(
                    agent=self._state.agent, run_id=self._state.run_id, max_concurrent=max_concurrent
                ),
                start_to_close_timeout=ATTEMPT_TIMEOUT,
                schedule_to_close_timeout=budget.total,
                retry_policy=budget.retry_policy,
            )
        except ActivityError as err:
            if name == contracts.REQUEST_SLOT:
                raise_if_cancelled(err)
            reason = record_service_failure(self._state, budget, err, stage=None)
            workflow.logger.warning("%s failed for %s: %s", name, self._state.run_id, reason)
            if name == contracts.REQUEST_SLOT:
                raise ServiceFailed(name, reason) from None


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
