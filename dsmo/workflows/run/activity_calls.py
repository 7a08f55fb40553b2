"""Every activity the orchestrator calls goes through here: retry policies, and what a failure means.

`call` runs one activity (or local activity) and turns its failure into one of two things:
the run's own cancellation (an activity cancelled because the run was) comes back out as
`asyncio.CancelledError`, and anything else as `ActivityFailed`, carrying the innermost
failure's message. `call_or_end` is the common case of a node action: a failure ends the run
FAILED at that node.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, FailureError
from temporalio.exceptions import TimeoutError as ActivityTimeout

from dsmo.workflows.common.errors import ACTION_PERMANENT, MESSAGING_PERMANENT
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.node_types import RetrySpec
from dsmo.workflows.run.control import RunEnded

T = TypeVar("T")

# Messages, requests and definition look-ups: a few quick retries, none for a permanent error.
MESSAGING_RETRY = RetryPolicy(maximum_attempts=5, non_retryable_error_types=list(MESSAGING_PERMANENT))
# Stage attempts and compensations: the orchestrator (or CompensationRetry) decides on retries.
SINGLE_ATTEMPT = RetryPolicy(maximum_attempts=1)
MESSAGING_TIMEOUT = timedelta(seconds=30)


# How long an activity that heartbeats (a model call, a tool call) may go without one before
# Temporal takes its worker for dead and retries it elsewhere; it beats every `HEARTBEAT_EVERY`.
LIVENESS_TIMEOUT = timedelta(seconds=10)


def action_retry(retry: RetrySpec) -> RetryPolicy:
    """A saga action's retry policy, from its node's `retry:` (Temporal retries it)."""
    return RetryPolicy(
        maximum_attempts=retry.max_attempts,
        initial_interval=retry.initial_interval,
        backoff_coefficient=retry.backoff_coefficient,
        maximum_interval=retry.maximum_interval,
        non_retryable_error_types=list(ACTION_PERMANENT),
    )


class ActivityFailed(Exception):
    """An activity failed for good (its retries are over); ``error`` is Temporal's ActivityError."""

    def __init__(self, activity: str, error: ActivityError) -> None:
        self.activity, self.error = activity, error
        self.message = failure_message(error)
        super().__init__(self.message)


async def call(
    activity: str,
    arg: Any,
    *,
    result_type: type[T],
    start_to_close_timeout: timedelta,
    retry_policy: RetryPolicy,
    schedule_to_close_timeout: timedelta | None = None,
    heartbeat_timeout: timedelta | None = None,
    summary: str | None = None,
    local: bool = False,
    cancellation_is_failure: bool = False,
) -> T:
    """Run ``activity`` with ``arg`` and return its result.

    Raises:
        asyncio.CancelledError: the activity was cancelled because the run is being cancelled
            (unless ``cancellation_is_failure``: work that must finish while the run is
            cancelled, like settling and compensating, sees it as a failure).
        ActivityFailed: the activity failed and its retry policy gave up.
    """
    result: T
    try:
        if local:
            result = await workflow.execute_local_activity(
                activity,
                arg,
                result_type=result_type,
                start_to_close_timeout=start_to_close_timeout,
                schedule_to_close_timeout=schedule_to_close_timeout,
                retry_policy=retry_policy,
                summary=summary,
            )
        else:
            result = await workflow.execute_activity(
                activity,
                arg,
                result_type=result_type,
                start_to_close_timeout=start_to_close_timeout,
                schedule_to_close_timeout=schedule_to_close_timeout,
                heartbeat_timeout=heartbeat_timeout,
                retry_policy=retry_policy,
                summary=summary,
            )
    except ActivityError as err:
        if not cancellation_is_failure:
            raise_if_cancelled(err)
        raise ActivityFailed(activity, err) from None
    except (ApplicationError, ActivityTimeout) as err:
        if not local:
            raise
        # A local activity that raised comes back as its own error, not wrapped in an
        # ActivityError as a regular one does; so does a local one that timed out when a worker
        # replays it from its marker (live, its timeout came wrapped). Wrap both, so every
        # caller sees one kind of failure, live and on replay alike (a raw timeout failed the run
        # on replay where the live run had retried: a nondeterminism error).
        raise ActivityFailed(activity, _wrapped(activity, err)) from None
    return result


async def call_or_end(
    activity: str,
    arg: Any,
    *,
    result_type: type[T],
    node_id: str,
    failed: str,
    retry_policy: RetryPolicy = MESSAGING_RETRY,
    start_to_close_timeout: timedelta = MESSAGING_TIMEOUT,
    summary: str | None = None,
) -> T:
    """`call`, where a failure ends the run FAILED at ``node_id`` with "``failed``: <reason>"."""
    try:
        return await call(
            activity,
            arg,
            result_type=result_type,
            start_to_close_timeout=start_to_close_timeout,
            retry_policy=retry_policy,
            summary=summary,
        )
    except ActivityFailed as failure:
        raise RunEnded(RunStatus.FAILED, node_id, f"{failed}: {failure.message}") from None


def _wrapped(activity: str, err: FailureError) -> ActivityError:
    wrapper = ActivityError(
        "Local activity error",
        scheduled_event_id=0,
        started_event_id=0,
        identity="",
        activity_type=activity,
        activity_id="",
        retry_state=None,
    )
    wrapper.__cause__ = err
    return wrapper


def raise_if_cancelled(err: ActivityError) -> None:
    """An activity cancelled because the run was cancelled is the run's cancellation, not a failure."""
    if isinstance(err.cause, CancelledError):
        raise asyncio.CancelledError(str(err.cause)) from err


def failure_message(err: BaseException) -> str:
    """The innermost failure's message: what the activity said, not Temporal's wrapper."""
    cause: BaseException | None = err.cause if isinstance(err, FailureError) else err
    while isinstance(cause, FailureError) and not isinstance(cause, ApplicationError) and cause.cause is not None:
        cause = cause.cause
    return str(cause or err)
