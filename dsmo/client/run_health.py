"""Why a run is not moving, asked of Temporal itself: is a worker polling its task queue, and
is its workflow task failing (Temporal retries a failing workflow task for ever)?"""

from __future__ import annotations

from datetime import UTC

from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client, WorkflowExecutionDescription
from temporalio.service import RPCError

from dsmo.workflows.contracts.run_records import WorkflowTaskFailure

# A task that failed once may be a crash; failed and retried, it is failing.
FAILING_FROM_ATTEMPT = 2
# Searched from the newest event back for the failure that began the streak.
HISTORY_TAIL = 50


def no_worker_hint(task_queue: str) -> str:
    return f"no worker is polling task queue `{task_queue}`; start one with `dsmo worker` or `dsmo dev up --worker`"


def failing_hint(failure: WorkflowTaskFailure) -> str:
    since = f" since {failure.since.isoformat(timespec='seconds')}" if failure.since else ""
    return f"workflow task failing{since} (attempt {failure.attempts}): {failure.error}"


async def workflow_task_failure(client: Client, described: WorkflowExecutionDescription) -> WorkflowTaskFailure | None:
    """The failure of an open run's workflow task that keeps being retried, or None.

    Temporal writes the first failure of a streak to the history and only counts the retries
    (the pending workflow task's attempt): the error comes from the first, the count from the other.
    """
    if described.close_time is not None:
        return None
    pending = described.raw_description.pending_workflow_task
    if not described.raw_description.HasField("pending_workflow_task") or pending.attempt < FAILING_FROM_ATTEMPT:
        return None
    since = (
        pending.original_scheduled_time.ToDatetime(tzinfo=UTC) if pending.HasField("original_scheduled_time") else None
    )
    error = "the workflow task timed out (the worker stopped or is blocked)"
    try:
        response = await client.workflow_service.get_workflow_execution_history_reverse(
            GetWorkflowExecutionHistoryReverseRequest(
                namespace=client.namespace,
                execution=described.raw_info.execution,
                maximum_page_size=HISTORY_TAIL,
            )
        )
    except RPCError:
        response = None
    for event in response.history.events if response else []:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            break
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            error = _failure_text(event.workflow_task_failed_event_attributes.failure)
            since = event.event_time.ToDatetime(tzinfo=UTC)
            break
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            since = event.event_time.ToDatetime(tzinfo=UTC)
            break
    return WorkflowTaskFailure(attempts=pending.attempt, since=since, error=error)


def _failure_text(failure: Failure, limit: int = 500) -> str:
    """The failure and its causes in one line ("Failed decoding arguments: 1 validation error ...")."""
    parts: list[str] = []
    current: Failure | None = failure
    while current is not None and len(parts) < 5:
        line = " ".join(current.message.split())
        if line and line not in parts:
            parts.append(line)
        current = current.cause if current.HasField("cause") else None
    text = ": ".join(parts) or "workflow task failed"
    return text if len(text) <= limit else text[: limit - 1] + "…"
