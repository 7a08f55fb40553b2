"""CompensationRetry: a failed compensation, retried durably with backoff until it succeeds or
needs a person (the seed's "worker de compensación", done with Temporal timers instead of a poll).

It is started by the run that unwound, outlives it (abandoned child), and records every attempt.
It is started with the task in its memo; when the last retry fails it ends Failed with its state
as the failure's details, so `dsmo compensations failed` lists it (no worker needed) and
`dsmo compensations retry ID` can try once more.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import Field

    from dsmo.workflows.common.wire import WireModel
    from dsmo.workflows.contracts import activity_io as contracts
    from dsmo.workflows.run.activity_calls import SINGLE_ATTEMPT, ActivityFailed, call


def retry_id(run_id: str, node: str) -> str:
    return f"comp-retry:{run_id}:{node}"


class CompensationRetryRequest(WireModel):
    task: contracts.CompensationTask
    retries: int = 5
    initial_interval_seconds: float = 60.0
    backoff_coefficient: float = 2.0
    errors: list[str] = Field(default_factory=list)
    immediate: bool = False  # a retry asked for by a person: the first attempt runs at once


class CompensationRetryState(WireModel):
    run_id: str
    node: str
    action: str
    status: str  # retrying | succeeded | failed
    attempts: int
    last_error: str | None = None
    next_attempt_at: str | None = None
    history: list[dict[str, Any]] = Field(default_factory=list)


@workflow.defn(name="CompensationRetry")
class CompensationRetry:
    @workflow.init
    def __init__(self, request: CompensationRetryRequest) -> None:
        task = request.task
        self._state = CompensationRetryState(
            run_id=task.run_id,
            node=task.node,
            action=task.action,
            status="retrying",
            attempts=task.attempt,
            last_error=request.errors[-1] if request.errors else None,
            # The attempt that failed before this workflow started (at the unwind, or the last one).
            history=[
                {
                    "attempt": task.attempt,
                    "at": workflow.info().start_time.isoformat(),
                    "error": request.errors[-1] if request.errors else None,
                }
            ],
        )

    @workflow.run
    async def run(self, request: CompensationRetryRequest) -> CompensationRetryState:
        state, task = self._state, request.task
        for retry in range(1, request.retries + 1):
            delay = timedelta(seconds=request.initial_interval_seconds * request.backoff_coefficient ** (retry - 1))
            if not (request.immediate and retry == 1):
                state.next_attempt_at = (workflow.now() + delay).isoformat()
                await workflow.sleep(delay)
            attempt = task.attempt + retry
            state.attempts = attempt
            try:
                result = await call(
                    contracts.COMPENSATE,
                    task.model_copy(update={"attempt": attempt}),
                    result_type=contracts.CompensationResult,
                    start_to_close_timeout=timedelta(seconds=60),
                    retry_policy=SINGLE_ATTEMPT,
                    cancellation_is_failure=True,
                )
            except ActivityFailed as failed:
                state.last_error = failed.message
                state.history.append({"attempt": attempt, "at": workflow.now().isoformat(), "error": state.last_error})
                workflow.logger.warning(
                    "compensation %s of %s failed (attempt %d): %s", task.node, task.run_id, attempt, state.last_error
                )
                continue
            state.status, state.next_attempt_at = "succeeded", None
            state.history.append({"attempt": attempt, "at": workflow.now().isoformat(), "applied": result.applied})
            return state
        state.status, state.next_attempt_at = "failed", None
        # Listed by `dsmo compensations failed`: the task is in the memo set at start, the state here.
        raise ApplicationError(
            f"compensation {task.node} of run {task.run_id} failed after {state.attempts} attempts: {state.last_error}",
            state.model_dump(mode="json"),
            type="CompensationFailed",
            non_retryable=True,
        )

    @workflow.query(name="status")
    def status(self) -> CompensationRetryState:
        return self._state
