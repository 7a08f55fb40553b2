"""Where one run stands: its status (with or without a worker), its variables, its result.

A run answers the `status` query itself; when it cannot (its workflow task keeps failing, no
worker polls its task queue, it ended and its worker is gone) the view comes from Temporal's
own record instead: the result an ended run's history holds, else what visibility knows, with
the reason in ``problem``. A run Temporal closed itself (terminated, timed out) is shown ended,
though its query, which replays its history up to that close, still answers what it did last.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import WorkflowExecutionDescription, WorkflowFailureError
from temporalio.exceptions import ApplicationError, CancelledError, TerminatedError
from temporalio.exceptions import TimeoutError as TemporalTimeout
from temporalio.service import RPCError

from dsmo.activities.definition_store import config_key
from dsmo.client import run_health
from dsmo.client.client_errors import NoWorker, RunNotStarted, WorkflowTaskFailing
from dsmo.client.core import ClientCore
from dsmo.client.places_in_line import with_place_in_line
from dsmo.client.rpc_errors import rpc_error
from dsmo.client.status_views import (
    closed_around_dsmo,
    closed_around_view,
    closed_record,
    ended_view,
    visibility_view,
)
from dsmo.client.unanswered import unless_failing
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import check_run_id
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import ExecutionResult, StatusView


async def status(core: ClientCore, run_id: str) -> StatusView:
    """The run's status; for an ended run with no worker, from its history; else from visibility.

    `RunHandle.status` documents it.
    """
    described = await core.describe(run_id)
    if described is not None:
        failure = await run_health.workflow_task_failure(core.temporal, described)
        if failure is not None:
            return visibility_view(described, problem=run_health.failing_hint(failure), failure=failure)
        if not await core.worker_polling(described.task_queue):
            if described.close_time is not None and (ended := await _ended_view(core, described)) is not None:
                return ended
            return visibility_view(described, problem=run_health.no_worker_hint(described.task_queue))
    try:
        view: StatusView = await core.query(run_id, "status", StatusView)
    except RunNotStarted:
        if described is None:
            raise
        return visibility_view(described)
    except (WorkflowTaskFailing, NoWorker) as err:  # it began failing, or its worker stopped, just now
        described = await core.describe(run_id)
        if described is None:
            raise
        if described.close_time is not None and (ended := await _ended_view(core, described)) is not None:
            return ended
        failure = await run_health.workflow_task_failure(core.temporal, described)
        return visibility_view(described, problem=str(err).split(": ", 1)[-1], failure=failure)
    except DsmoError:
        # An ended run whose query failed otherwise (its worker stopped while answering): its
        # history still holds how it ended.
        if described is None or described.close_time is None:
            raise
        if (ended := await _ended_view(core, described)) is None:
            raise
        return ended
    if not view.status.terminal and described is not None and closed_around_dsmo(described):
        # Terminated (or timed out) by Temporal: the run's code never saw its end. The describe
        # made above tells, so a live run's status costs no call more.
        return await closed_around_view(core.temporal, described, view)
    if view.queued_for is not None and view.status is RunStatus.PENDING:
        return await with_place_in_line(core.temporal, view)
    return view


async def _ended_view(core: ClientCore, described: WorkflowExecutionDescription) -> StatusView | None:
    """An ended run's view from the record its history holds, or from visibility and how Temporal
    closed it (no query, no worker); None if it holds none (cancelled before it recorded how)."""
    if closed_around_dsmo(described):
        return await closed_around_view(core.temporal, described, visibility_view(described))
    record = await closed_record(core.temporal, described.id)
    if record is None:
        return None
    return ended_view(described, record, lambda version: core.artifacts.uri(config_key(version)))


async def variables(core: ClientCore, run_id: str) -> dict[str, Any]:
    """The run's variables (its input, event variables, `stages`, `steps`): `RunHandle.variables` documents it."""
    values: dict[str, Any] = await core.query(run_id, "variables", dict[str, Any])
    return values


async def result(core: ClientCore, run_id: str) -> ExecutionResult:
    """Wait for the run to end; failed and timed-out runs return their record too: `RunHandle.result` documents it."""
    check_run_id(run_id)
    return await unless_failing(core.temporal, core.handle(run_id), _result(core, run_id))


async def _result(core: ClientCore, run_id: str) -> ExecutionResult:
    handle = core.temporal.get_workflow_handle(run_id, result_type=ExecutionResult)
    try:
        ended: ExecutionResult = await handle.result()
        return ended
    except WorkflowFailureError as err:
        cause = err.cause
        # Failed, timed-out and cancelled runs carry the seed's record as the failure's details.
        if isinstance(cause, ApplicationError | CancelledError) and cause.details:
            return ExecutionResult.model_validate(cause.details[0])
        if isinstance(cause, CancelledError | TerminatedError | TemporalTimeout):
            # Temporal keeps no details on a cancelled run, and a run it terminated or timed out
            # recorded none: the record is read from the run's status (`closed_around_view`).
            return await _record_from_queries(core, run_id)
        raise
    except RPCError as err:
        raise rpc_error(core.settings, run_id, err) from None


async def _record_from_queries(core: ClientCore, run_id: str) -> ExecutionResult:
    view = await status(core, run_id)
    if view.completed_at is None or view.result_type is None:
        raise DsmoError(f"run {run_id!r} ended without its record")
    return ExecutionResult(
        run_id=run_id,
        status=view.status,
        completed_at=view.completed_at,
        result_type=view.result_type,
        result_summary=view.result_summary,
        error_message=view.error_message,
        failed_action_id=view.failed_action_id,
        cancelled_by=view.cancelled_by,
        cancel_reason=view.cancel_reason,
        compensation=view.compensation,
        path=view.path,
        variables=await variables(core, run_id),
    )


async def wait_for_status(
    core: ClientCore, run_id: str, statuses: set[RunStatus], *, timeout: float = 30.0, interval: float = 0.1
) -> StatusView:
    """Poll the run's status until it is one of ``statuses``: `RunHandle.wait_for_status` documents it."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        view = await status(core, run_id)
        if view.status in statuses and view.problem is None:
            return view
        if view.workflow_task_failure is not None:
            raise WorkflowTaskFailing(f"run {run_id!r}: {view.problem}")
        if view.status.terminal:
            detail = view.error_message or view.result_summary or ""
            raise DsmoError(f"run {run_id} ended {view.status}, not {'/'.join(sorted(statuses))}: {detail}")
        if asyncio.get_running_loop().time() > deadline:
            raise DsmoError(f"run {run_id} is {view.status}, not {'/'.join(sorted(statuses))}, after {timeout:.0f}s")
        await asyncio.sleep(interval)


def spend_line(usage: dict[str, int | float] | None) -> str | None:
    """What a run's model calls spent, in one line (``3 model calls, 1,240 tokens, 0.0042 USD``)."""
    if not usage:
        return None
    calls = int(usage.get("modelCalls", 0))
    line = f"{calls} model call{'' if calls == 1 else 's'}, {int(usage.get('tokens', 0)):,} tokens"
    cost = usage.get("costUsd")
    return f"{line}, {cost:.4f} USD" if cost else line
