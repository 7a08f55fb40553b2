"""A run's `StatusView` when the run itself cannot be asked: from visibility (a delayed start, no
worker, a failing workflow task) or, once it has ended, from the record its history holds."""

from __future__ import annotations

from collections.abc import Callable

from temporalio.client import Client, WorkflowExecutionDescription, WorkflowFailureError
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.service import RPCError

from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import ExecutionResult, StatusView, WorkflowTaskFailure


def visibility_view(
    described: WorkflowExecutionDescription,
    *,
    problem: str | None = None,
    failure: WorkflowTaskFailure | None = None,
) -> StatusView:
    """What visibility knows of a run: for a run whose start is delayed (no workflow task yet)
    and for one no worker can answer for."""
    attrs = described.typed_search_attributes
    delay_until = described.execution_time or described.start_time
    status = RunStatus(attrs.get(sa.AGENT_EXECUTION_STATUS) or RunStatus.PENDING.value)
    delayed = status is RunStatus.PENDING and delay_until > described.start_time
    waiting_for = attrs.get(sa.WAITING_FOR)
    return StatusView(
        run_id=described.id,
        agent=attrs.get(sa.AGENT_NAME) or "",
        workflow_version=attrs.get(sa.WORKFLOW_VERSION) or "",
        status=status,
        waiting_for=waiting_for,
        waiting_until=attrs.get(sa.WAITING_UNTIL) if waiting_for else None,
        pending_reason=f"scheduled to start at {delay_until.isoformat(timespec='seconds')}" if delayed else None,
        started_at=described.start_time,
        completed_at=described.close_time,
        problem=problem,
        workflow_task_failure=failure,
    )


async def closed_record(temporal: Client, run_id: str) -> ExecutionResult | None:
    """The record a closed run ended with, from its history alone (no query, no worker); None if
    the history holds none (terminated from outside, or cancelled without details)."""
    handle = temporal.get_workflow_handle(run_id, result_type=ExecutionResult)
    try:
        result: ExecutionResult = await handle.result()
        return result
    except WorkflowFailureError as err:
        cause = err.cause
        # Failed, timed-out and cancelled runs carry the seed's record as the failure's details.
        if isinstance(cause, ApplicationError | CancelledError) and cause.details:
            return ExecutionResult.model_validate(cause.details[0])
        return None
    except (RPCError, TypeError, ValueError):
        return None


def ended_view(
    described: WorkflowExecutionDescription, record: ExecutionResult, config_uri: Callable[[str], str]
) -> StatusView:
    """An ended run's view from its final record and its visibility entry.

    Args:
        described: The run's description (agent, version, start time).
        record: The record the run ended with.
        config_uri: The URI of a workflow version's config snapshot (where the run's ``config_ref`` points).

    Returns:
        The view a `status` query would answer with, less what only a live run has (its inbox).
    """
    attrs = described.typed_search_attributes
    version = attrs.get(sa.WORKFLOW_VERSION) or ""
    return StatusView(
        run_id=described.id,
        agent=attrs.get(sa.AGENT_NAME) or "",
        workflow_version=version,
        status=record.status,
        current_node=record.path[-1] if record.path else None,
        path=record.path,
        config_ref=config_uri(version) if version else None,
        started_at=described.start_time,
        updated_at=record.completed_at,
        completed_at=record.completed_at,
        result_type=record.result_type,
        result_summary=record.result_summary,
        error_message=record.error_message,
        failed_action_id=record.failed_action_id,
        cancelled_by=record.cancelled_by,
        cancel_reason=record.cancel_reason,
        compensation=record.compensation,
    )
