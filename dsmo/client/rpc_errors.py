"""Temporal's refusals as the client's errors: one line naming the run and the reason."""

from __future__ import annotations

from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from dsmo.client.client_errors import RunClosed, RunNotFound, TemporalUnavailable, WorkflowTaskFailing
from dsmo.client.connection import first_line
from dsmo.config.settings import Settings
from dsmo.workflows.common.errors import DsmoError


def rpc_error(settings: Settings, run_id: str, err: RPCError) -> DsmoError:
    """The client's error for a failed call about ``run_id``: not found, ended, Temporal down, or other."""
    if err.status == RPCStatusCode.NOT_FOUND:
        text = str(err).lower()
        if "already completed" in text or "closed" in text or "completed" in text:
            return RunClosed(f"run {run_id!r} has already ended; it is not waiting for any event")
        return RunNotFound(f"run {run_id!r} not found in namespace {settings.temporal.namespace}")
    if err.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
        return TemporalUnavailable(f"Temporal at {settings.temporal.address} is unavailable: {first_line(err)}")
    return DsmoError(f"run {run_id!r}: {first_line(err)}")


def update_failure(err: WorkflowUpdateFailedError) -> str:
    """The run's reason for refusing an update (its validator's message)."""
    cause = err.cause
    return cause.message if isinstance(cause, ApplicationError) else str(cause or err)


def not_taken(err: DsmoError, event_type: str) -> DsmoError:
    """A run that cannot take an event now, saying how to send it later."""
    if not isinstance(err, WorkflowTaskFailing):
        return err
    return WorkflowTaskFailing(
        f"{err}; {event_type} not taken: send it again with the same event id once the run moves"
    )
