"""A run's `StatusView` when the run itself cannot be asked: from visibility, its history or its trail.

From visibility (a delayed start, no worker, a failing workflow task), once it has ended from the
record its history holds, once Temporal closed it around DSMO (a termination, a run timeout) from
Temporal's own record of that, and once Temporal no longer has it (its subject erased, or past
retention) from the trail it exported.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import timedelta

from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHistoryEventFilterType,
)
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.service import RPCError

from dsmo.activities.definition_store import config_key
from dsmo.client import run_trails
from dsmo.client.core import ClientCore
from dsmo.client.trail_store import subject_erased
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import (
    ENDING_EVENTS,
    AuditEvent,
    ExecutionResult,
    StatusView,
    WorkflowTaskFailure,
)


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


# How Temporal closes a run without the run's code recording an ending. The run's own `status`
# query cannot tell: it replays the history up to Temporal's close, which its code never sees.
CLOSED_AROUND_DSMO = frozenset({WorkflowExecutionStatus.TERMINATED, WorkflowExecutionStatus.TIMED_OUT})


def closed_around_dsmo(described: WorkflowExecutionDescription) -> bool:
    """Whether Temporal closed the run itself (terminated, timed out), so that no ending of DSMO's is recorded."""
    return described.status in CLOSED_AROUND_DSMO


def closed_around_status(closed: WorkflowExecutionStatus | None) -> RunStatus | None:
    """The status of a run Temporal closed itself (``closed``: how it did): a termination stops
    the run from outside as a cancel does (without the unwinding), a run or execution timeout is
    a timeout, the nearest statuses the status table has; None for any other close or none."""
    if closed is WorkflowExecutionStatus.TIMED_OUT:
        return RunStatus.TIMEOUT
    return RunStatus.CANCELLED if closed is WorkflowExecutionStatus.TERMINATED else None


async def closed_around_view(temporal: Client, described: WorkflowExecutionDescription, view: StatusView) -> StatusView:
    """The view of a run Temporal closed itself: how it ended instead of what it did last.

    Args:
        temporal: The Temporal client (a termination's reason and who asked are read from the
            run's close event: one history call, made only for a terminated run).
        described: The run's description; `closed_around_dsmo` holds for it.
        view: What the run last said of itself (its `status` query), or `visibility_view`.

    Returns:
        ``view`` ended: ``cancelled`` for a termination (``cancelledBy`` the identity that asked,
        ``cancelReason`` its reason), ``timeout`` for Temporal's run or execution timeout; the
        node it was in as ``failedActionId``, and in ``resultSummary`` how Temporal ended it.
    """
    status = closed_around_status(described.status) or RunStatus.CANCELLED
    timed_out = status is RunStatus.TIMEOUT
    update: dict[str, object] = {}
    if timed_out:
        how = f"timed out by Temporal ({_timeouts(described)})"
        update |= {"result_type": "timeout"}
    else:
        by, reason = await _termination(temporal, described)
        how = f"terminated through Temporal by {by}" + (f": {reason}" if reason else "")
        update |= {"result_type": "cancelled", "cancelled_by": by, "cancel_reason": reason}
    # What only a live run has goes: the wait it was in, its inbox, its place in a line.
    gone = dict.fromkeys(("waiting_for", "waiting_until", "waiting_data", "pending_reason", "queued_for", "throttled"))
    return view.model_copy(
        update={
            **gone,
            **update,
            "inbox": None,
            "status": status,
            "failed_action_id": view.current_node,
            "updated_at": described.close_time,
            "completed_at": described.close_time,
            "result_summary": f"{how}; no compensation ran and its audit trail records no ending",
        }
    )


async def _termination(temporal: Client, described: WorkflowExecutionDescription) -> tuple[str, str | None]:
    """Who terminated the run (the client identity Temporal recorded) and why, from its close event."""
    handle = temporal.get_workflow_handle(described.id, run_id=described.run_id)
    try:
        async for event in handle.fetch_history_events(event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT):
            if event.HasField("workflow_execution_terminated_event_attributes"):
                attrs = event.workflow_execution_terminated_event_attributes
                return attrs.identity or "temporal", attrs.reason or None
    except RPCError:
        pass  # the ending stands without its reason
    return "temporal", None


def _timeouts(described: WorkflowExecutionDescription) -> str:
    """The run's Temporal timeouts, one of which closed it (``workflow run timeout 0:00:05``)."""
    config = described.raw_description.execution_config
    timeouts = [
        f"workflow {name} timeout {timedelta(seconds=duration.ToSeconds())}"
        for name, duration in (("run", config.workflow_run_timeout), ("execution", config.workflow_execution_timeout))
        if duration.ToSeconds() > 0
    ]
    return ", ".join(timeouts) or "its workflow timeout"


def gone_problem(*, erased: bool) -> str:
    """Why a run is shown from its exported trail: the one sentence `dsmo status` and the console say."""
    why = "its data subject was erased" if erased else "past its retention"
    return f"Temporal no longer has this run ({why}); shown from its exported audit trail"


def trail_view(
    run_id: str, trail: Sequence[AuditEvent], config_uri: Callable[[str], str], *, erased: bool
) -> StatusView:
    """The view of a run Temporal no longer has, from the trail it exported when it ended.

    Args:
        run_id: The run.
        trail: Its exported trail (RUN_CREATED first; its ending, RUN_COMPLETED or RUN_ABORTED,
            may be followed by the concurrency slots it gave back).
        config_uri: The URI of a workflow version's config snapshot.
        erased: Whether the run's data subject was erased (`subject_erased`).

    Returns:
        Its agent, version, ending, path and times as the trail recorded them, and in ``problem``
        why it is shown from its trail.
    """
    first = trail[0]
    # The ending, not the last event: a run with concurrency keys gives its slots back after it.
    last = next((event for event in reversed(trail) if event.type in ENDING_EVENTS), trail[-1])
    ended = str(last.data.get("status") or "")
    result_type = last.data.get("resultType")
    return StatusView(
        run_id=run_id,
        agent=str(first.data.get("agent") or ""),
        workflow_version=first.workflow_version,
        status=RunStatus(ended) if ended in set(RunStatus) else RunStatus.COMPLETED,
        path=[event.stage for event in trail if event.type == "STAGE_STARTED" and event.stage],
        config_ref=config_uri(last.workflow_version),
        started_at=first.at,
        completed_at=last.at,
        result_type=str(result_type) if result_type else None,
        problem=gone_problem(erased=erased),
    )


async def gone_view(core: ClientCore, run_id: str) -> tuple[StatusView, list[AuditEvent]]:
    """`trail_view` of a run Temporal no longer has, and its trail: what `dsmo status` and the
    console show of it.

    Raises:
        RunNotFound: It exported no trail either (no run has this id).
    """
    trail = await run_trails.events(core, run_id)  # the export: no history needed
    store = core.artifacts
    erased = await asyncio.to_thread(subject_erased, store, trail[0].data)
    return trail_view(run_id, trail, lambda version: store.uri(config_key(version)), erased=erased), trail
