"""Compensations that need a person: list the ones whose retries ran out, and retry one.

A retry by hand is a CompensationRetry of its own (``{id}:manual-...``). A compensation is listed
while none of its retries, its own or one by hand, has succeeded, once, by its own id, with its
latest attempt; one a retry by hand undid is not retried again.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from temporalio.client import WorkflowFailureError

from dsmo.client.core import ClientCore
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.activity_io import CompensationTask
from dsmo.workflows.saga.compensation_retry import CompensationRetry, CompensationRetryRequest, CompensationRetryState

FAILED_QUERY = "WorkflowType='CompensationRetry' AND ExecutionStatus='Failed'"
MANUAL = ":manual-"  # what follows a compensation's id in the id of a retry of it by hand


@dataclass(frozen=True)
class FailedCompensation:
    """A saga compensation whose retries ran out: a person must act (`DsmoClient.failed_compensations`).

    Attributes:
        id: The compensation's id (its retry workflow's), for `DsmoClient.retry_compensation`.
        run_id: The run whose saga it undoes.
        node: The node whose step it undoes.
        action: The compensating action.
        attempts: How many times it was tried.
        last_error: The last attempt's error.
    """

    id: str
    run_id: str
    node: str
    action: str
    attempts: int
    last_error: str


def _memo(raw: Any) -> dict[str, Any]:
    return raw if isinstance(raw, dict) else {}


async def _final_state(core: ClientCore, compensation_id: str) -> CompensationRetryState | None:
    """The state a failed CompensationRetry ended with (its failure's details); no worker needed."""
    try:
        await core.temporal.get_workflow_handle(compensation_id).result()
    except WorkflowFailureError as err:
        details = getattr(err.cause, "details", None)
        if details:
            return CompensationRetryState.model_validate(details[0])
    return None


def _own_id(retry_id: str) -> str:
    """The compensation a retry workflow tries: its own id, or the one a retry by hand names."""
    return retry_id.split(MANUAL, 1)[0]


async def _retries(core: ClientCore, compensation_id: str, status: str) -> list[str]:
    """The ids of the compensation's retry workflows (its own, by hand) that ended ``status``, latest first."""
    query = (
        f"WorkflowType='CompensationRetry' AND ExecutionStatus='{status}' "
        f"AND WorkflowId STARTS_WITH '{compensation_id}'"
    )
    ended = [row async for row in core.temporal.list_workflows(query)]
    ended.sort(key=lambda row: row.close_time or row.start_time, reverse=True)
    return [row.id for row in ended if _own_id(row.id) == compensation_id]


async def failed(core: ClientCore, limit: int = 1000) -> list[FailedCompensation]:
    """The compensations whose retries ran out, by id (at most ``limit``); no worker needed."""
    rows, seen = [], set()
    async for execution in core.temporal.list_workflows(FAILED_QUERY, limit=limit):
        compensation_id = _own_id(execution.id)
        if compensation_id in seen:
            continue
        seen.add(compensation_id)
        if await _retries(core, compensation_id, "Completed"):
            continue  # a retry by hand undid it
        latest = (await _retries(core, compensation_id, "Failed") or [execution.id])[0]
        state = await _final_state(core, latest)
        if state is not None:
            rows.append(
                FailedCompensation(
                    compensation_id, state.run_id, state.node, state.action, state.attempts, state.last_error or ""
                )
            )
    return sorted(rows, key=lambda row: row.id)


async def retry(core: ClientCore, compensation_id: str, *, task_queue: str | None = None) -> CompensationRetryState:
    """One more attempt, now, under the same key (`comp:{run}:{node}`), so it still applies once."""
    compensation_id = _own_id(compensation_id)
    if "'" in compensation_id or "\\" in compensation_id:
        raise DsmoError(f"compensation {compensation_id!r} not found (see `dsmo compensations failed`)")
    undone = await _retries(core, compensation_id, "Completed")
    if undone:
        raise DsmoError(f"compensation {compensation_id!r} was undone already, by {undone[0]}; nothing to retry")
    handle = core.temporal.get_workflow_handle(compensation_id)
    try:
        described = await handle.describe()
    except Exception:  # noqa: BLE001 - the RPC error says "not found" in several ways
        raise DsmoError(f"compensation {compensation_id!r} not found (see `dsmo compensations failed`)") from None
    info = _memo((await described.memo()).get("compensation"))
    latest = (await _retries(core, compensation_id, "Failed") or [compensation_id])[0]
    state = await _final_state(core, latest) if info else None
    if state is None:
        raise DsmoError(f"compensation {compensation_id!r} has not failed for good; nothing to retry by hand")
    task = CompensationTask.model_validate(info["task"]).model_copy(update={"attempt": state.attempts})
    try:
        return await core.temporal.execute_workflow(
            CompensationRetry.run,
            CompensationRetryRequest(task=task, retries=1, immediate=True),
            id=f"{compensation_id}:manual-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue or described.task_queue,
        )
    except WorkflowFailureError as err:
        raise DsmoError(f"compensation {compensation_id} failed again: {err.cause}") from None
