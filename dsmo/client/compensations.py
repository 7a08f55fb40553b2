"""Compensations that need a person: list the ones whose retries ran out, and retry one."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio.client import WorkflowFailureError

from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.activity_io import CompensationTask
from dsmo.workflows.saga.compensation_retry import CompensationRetry, CompensationRetryRequest, CompensationRetryState

if TYPE_CHECKING:  # the client calls this module; it names the client only in annotations
    from dsmo.client.dsmo_client import DsmoClient

FAILED_QUERY = "WorkflowType='CompensationRetry' AND ExecutionStatus='Failed'"


@dataclass(frozen=True)
class FailedCompensation:
    id: str
    run_id: str
    node: str
    action: str
    attempts: int
    last_error: str


def _memo(raw: Any) -> dict[str, Any]:
    return raw if isinstance(raw, dict) else {}


async def _final_state(dsmo: DsmoClient, compensation_id: str) -> CompensationRetryState | None:
    """The state a failed CompensationRetry ended with (its failure's details); no worker needed."""
    try:
        await dsmo.temporal.get_workflow_handle(compensation_id).result()
    except WorkflowFailureError as err:
        details = getattr(err.cause, "details", None)
        if details:
            return CompensationRetryState.model_validate(details[0])
    return None


async def failed(dsmo: DsmoClient, limit: int = 1000) -> list[FailedCompensation]:
    rows = []
    async for execution in dsmo.temporal.list_workflows(FAILED_QUERY, limit=limit):
        state = await _final_state(dsmo, execution.id)
        if state is not None:
            rows.append(
                FailedCompensation(
                    execution.id, state.run_id, state.node, state.action, state.attempts, state.last_error or ""
                )
            )
    return sorted(rows, key=lambda row: row.id)


async def retry(dsmo: DsmoClient, compensation_id: str, *, task_queue: str | None = None) -> CompensationRetryState:
    """One more attempt, now, under the same key (`comp:{run}:{node}`), so it still applies once."""
    handle = dsmo.temporal.get_workflow_handle(compensation_id)
    try:
        described = await handle.describe()
    except Exception:  # noqa: BLE001 - the RPC error says "not found" in several ways
        raise DsmoError(f"compensation {compensation_id!r} not found (see `dsmo compensations failed`)") from None
    info = _memo((await described.memo()).get("compensation"))
    state = await _final_state(dsmo, compensation_id) if info else None
    if state is None:
        raise DsmoError(f"compensation {compensation_id!r} has not failed for good; nothing to retry by hand")
    task = CompensationTask.model_validate(info["task"]).model_copy(update={"attempt": state.attempts})
    try:
        return await dsmo.temporal.execute_workflow(
            CompensationRetry.run,
            CompensationRetryRequest(task=task, retries=1, immediate=True),
            id=f"{compensation_id}:manual-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue or described.task_queue,
        )
    except WorkflowFailureError as err:
        raise DsmoError(f"compensation {compensation_id} failed again: {err.cause}") from None
