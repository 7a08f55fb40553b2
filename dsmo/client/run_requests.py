"""What a caller asks of one running run: take a resume event (answered, or as a fire-and-forget
signal), take a person's reply, or stop (cancel, with who and why recorded)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from dsmo.client import run_status, run_trails
from dsmo.client.client_errors import EventMalformed, EventNotAccepted, NoWorker, RunClosed, WorkflowTaskFailing
from dsmo.client.core import ClientCore
from dsmo.client.event_checks import check_event
from dsmo.client.rpc_errors import not_taken, rpc_error, update_failure
from dsmo.client.unanswered import closed_or_missing, query_error, update_run
from dsmo.runtime.telemetry import tracer
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.run_records import StatusView
from dsmo.workflows.events.resume_events import DUPLICATE_NOT_RECORDED, EventAck, EventRejected, parse_signal


def required_reason(reason: str, what: str) -> None:
    """Refuse an empty or blank reason for a change to a run, before anything is asked of it.

    The reason goes into the run's trail, where a blank one reads as no reason at all (a cancel
    with none is recorded as Temporal's own, "cancellation requested through Temporal").

    Args:
        reason: The reason given.
        what: What it explains, as the error says it (``"the run goes back"``).

    Raises:
        DsmoError: ``reason`` is empty or blank (``--reason: say why ...``).
    """
    if not reason.strip():
        raise DsmoError(f"--reason: say why {what}; it is recorded in the trail")


async def cancel(core: ClientCore, run_id: str, *, reason: str, by: str = "user") -> None:
    """Cancel a run in any non-terminal state (PENDING included); the run records who and why.

    `RunHandle.cancel` documents it.
    """
    required_reason(reason, "the run is cancelled")
    try:
        view: StatusView | None = await run_status.status(core, run_id)
    except (WorkflowTaskFailing, NoWorker):
        # The run cannot answer a query now. Temporal still records the request (and refuses
        # it for a run that has ended): the run unwinds as soon as its task runs again.
        view = None
    if view is not None and view.status.terminal:
        raise RunClosed(f"run {run_id!r} has already ended ({view.status}); nothing to cancel")
    try:
        await core.handle(run_id).cancel(reason=json.dumps({"cancelledBy": by, "cancelReason": reason}))
    except RPCError as err:
        raise rpc_error(core.settings, run_id, err) from None


async def deliver_event(
    core: ClientCore, run_id: str, event_type: str, data: dict[str, Any], *, event_id: str | None = None
) -> EventAck:
    """Deliver a resume event through the validated `deliver_event` update: `RunHandle.deliver` documents it."""
    event_id = event_id or str(uuid.uuid4())
    check_event(event_type, event_id, data)
    event = {"type": event_type, "event_id": event_id, "data": data}
    try:
        with tracer.start_as_current_span(
            f"dsmo.event {event_type}", context=await core.run_trace(run_id), attributes={"dsmo.run_id": run_id}
        ):
            ack = await update_run(core.temporal, core.handle(run_id), "deliver_event", event, EventAck)
        return ack
    except WorkflowTaskFailing as err:
        raise not_taken(err, event_type) from None
    except NoWorker as err:  # its worker stopped while the event waited for it
        raise NoWorker(f"{err}: send it again with event_id {event_id!r} to learn whether it was taken") from None
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        if isinstance(cause, ApplicationError) and cause.type == DUPLICATE_NOT_RECORDED:
            status = str(cause.details[0]) if cause.details else "unknown"
            return EventAck(event_id=event_id, accepted=False, duplicate=True, status=status, detail=cause.message)
        raise EventNotAccepted(f"{event_type} rejected: {update_failure(err)}") from None
    except RPCError as err:
        if "workflow task in failed state" in str(err).lower():  # failing before the watch looked
            raise not_taken(
                await query_error(core.temporal, core.settings, core.handle(run_id), "deliver_event", err),
                event_type,
            ) from None
        problem = await closed_or_missing(core.settings, core.handle(run_id), err)
        if isinstance(problem, RunClosed) and await _applied_before(core, run_id, event_id):
            # A retry of an event the run already took: idempotent, even after the run ended.
            return EventAck(event_id=event_id, accepted=False, duplicate=True, status="ended")
        raise problem from None


async def respond(core: ClientCore, run_id: str, text: str, *, event_id: str | None = None) -> EventAck:
    """Deliver a person's reply (`MESSAGE_RECEIVED`) to a run waiting for a response.

    `RunHandle.respond` documents it.
    """
    return await deliver_event(core, run_id, "MESSAGE_RECEIVED", {"text": text}, event_id=event_id)


async def decide(
    core: ClientCore,
    run_id: str,
    decision: str,
    *,
    arguments: dict[str, Any] | None = None,
    reason: str | None = None,
    by: str | None = None,
    call_id: str | None = None,
    call: str | None = None,
    event_id: str | None = None,
) -> EventAck:
    """Decide the tool call the run waits on (`TOOL_DECIDED`): `RunHandle.decide` documents it."""
    data = {"decision": decision, "arguments": arguments, "reason": reason, "by": by, "callId": call_id, "call": call}
    present = {name: value for name, value in data.items() if value is not None}
    return await deliver_event(core, run_id, "TOOL_DECIDED", present, event_id=event_id)


async def decide_budget(
    core: ClientCore,
    run_id: str,
    decision: str,
    *,
    tokens: int | None = None,
    cost_usd: float | None = None,
    model_calls: int | None = None,
    reason: str | None = None,
    by: str | None = None,
    event_id: str | None = None,
) -> EventAck:
    """Raise or stop the spent budget the run waits on (`BUDGET_DECIDED`): `RunHandle.decide_budget` documents it."""
    data = {
        "decision": decision,
        "tokens": tokens,
        "costUsd": cost_usd,
        "modelCalls": model_calls,
        "reason": reason,
        "by": by,
    }
    present = {name: value for name, value in data.items() if value is not None}
    return await deliver_event(core, run_id, "BUDGET_DECIDED", present, event_id=event_id)


async def signal_event(core: ClientCore, run_id: str, event_type: str, payload: dict[str, Any]) -> None:
    """Send a resume event as a Temporal signal: fire-and-forget, no answer: `RunHandle.signal` documents it."""
    try:
        parse_signal(event_type, payload)  # well_formed, as the run's signal handler asks it
    except EventRejected as problem:
        raise EventMalformed(f"{event_type} rejected: {problem}", problem) from None
    try:
        await core.handle(run_id).signal(event_type, payload)
    except RPCError as err:
        raise rpc_error(core.settings, run_id, err) from None


async def _applied_before(core: ClientCore, run_id: str, event_id: str) -> bool:
    try:
        trail = await run_trails.events(core, run_id)
    except DsmoError:
        return False
    return any(e.data.get("eventId") == event_id and e.type in ("RUN_RESUMED", "EVENT_RECEIVED") for e in trail)
