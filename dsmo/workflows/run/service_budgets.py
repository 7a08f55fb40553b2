"""How long a run keeps retrying DSMO's own infrastructure calls before it gives up.

Stages, messages and saga actions carry their own retry settings from the definition. The
activities here are DSMO's plumbing (the input artifact and config snapshot, the concurrency
limiter's slot, the dead letter, the audit export): each is retried with backoff capped at
`MAX_INTERVAL`, within a total budget per kind (Temporal's schedule-to-close timeout). A run
whose budget is spent records `SERVICE_FAILED` in its audit trail; where the run can still end
by its failure path it does so, with a dead letter (`dsmo dlq list`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, RetryState, TimeoutError, TimeoutType

from dsmo.workflows.common.durations import format_duration
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.subject_io import SUBJECT_KEY
from dsmo.workflows.run.activity_calls import call, failure_message
from dsmo.workflows.run.state import RunState

T = TypeVar("T")

MAX_INTERVAL = timedelta(seconds=30)
ATTEMPT_TIMEOUT = timedelta(seconds=30)


@dataclass(frozen=True)
class ServiceBudget:
    """One infrastructure activity's retry budget."""

    activity: str
    total: timedelta  # schedule-to-close: every attempt and every backoff
    why: str

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            initial_interval=timedelta(seconds=1),
            backoff_coefficient=2.0,
            maximum_interval=MAX_INTERVAL,
        )


BUDGETS: dict[str, ServiceBudget] = {
    budget.activity: budget
    for budget in (
        ServiceBudget(contracts.PREPARE_RUN, timedelta(minutes=10), "write the input artifact and config snapshot"),
        ServiceBudget(contracts.REQUEST_SLOT, timedelta(minutes=10), "ask the agent's limiter for a slot"),
        ServiceBudget(contracts.RELEASE_SLOT, timedelta(minutes=10), "give the slot back when the run ends"),
        ServiceBudget(contracts.REQUEST_TOKEN, timedelta(minutes=10), "ask a throttle's bucket for a token"),
        ServiceBudget(contracts.HAND_ON, timedelta(minutes=10), "start runs for delivered messages left untaken"),
        ServiceBudget(contracts.WRITE_DEAD_LETTER, timedelta(minutes=30), "write a dead letter"),
        ServiceBudget(contracts.EXPORT_AUDIT, timedelta(minutes=30), "export the audit trail when the run ends"),
        ServiceBudget(contracts.WRITE_AUDIT_SEGMENT, timedelta(minutes=10), "write the audit trail's next segment"),
        ServiceBudget(contracts.STORE_EVENT_VALUES, timedelta(minutes=2), "store an event's large variables"),
        ServiceBudget(SUBJECT_KEY, timedelta(minutes=10), "learn the keys of the run's data subject"),
    )
}


def budget_spent(err: ActivityError) -> bool:
    """True when the activity failed because its total budget ran out (not a permanent error)."""
    # Temporal stops retrying when the next attempt would start past the budget (retry state
    # TIMEOUT, the last attempt's error as cause), or times out the attempt that runs into it.
    if err.retry_state is RetryState.TIMEOUT:
        return True
    cause = err.cause
    return isinstance(cause, TimeoutError) and cause.type is TimeoutType.SCHEDULE_TO_CLOSE


def record_service_failure(state: RunState, budget: ServiceBudget, err: ActivityError, *, stage: str | None) -> str:
    """SERVICE_FAILED in the audit trail; returns the one-line reason."""
    spent = budget_spent(err)
    reason = (
        f"{budget.activity} kept failing for {format_duration(budget.total)} (its budget; {budget.why}): "
        f"{failure_message(err)}"
        if spent
        else f"{budget.activity} failed ({budget.why}): {failure_message(err)}"
    )
    state.audit.record(
        "SERVICE_FAILED",
        at=workflow.now(),
        stage=stage,
        data={
            "activity": budget.activity,
            "budget": format_duration(budget.total),
            "budgetSpent": spent,
            "error": reason,
        },
    )
    return reason


async def call_service(
    activity: str, arg: Any, *, result_type: type[T], local: bool = False, cancellation_is_failure: bool = False
) -> T:
    """`activity_calls.call` within the activity's budget; raises ActivityFailed when it is spent."""
    budget = BUDGETS[activity]
    return await call(
        activity,
        arg,
        result_type=result_type,
        start_to_close_timeout=ATTEMPT_TIMEOUT,
        schedule_to_close_timeout=budget.total,
        retry_policy=budget.retry_policy,
        local=local,
        cancellation_is_failure=cancellation_is_failure,
    )
