"""Routes of the executions resource: start a run, read one, list them, cancel one (run_changes.py
moves and rewinds one)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response

from dsmo.client.client_errors import (
    DefinitionNotFound,
    EventNotAccepted,
    RunAlreadyExists,
    RunClosed,
    RunNotFound,
)
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.server.api_keys import ApiKey
from dsmo.server.ingress import start_idempotency
from dsmo.server.ingress.bodies import (
    CancelRequest,
    StartRequest,
    StrictJsonRoute,
)
from dsmo.server.ingress.dependencies import (
    app_settings,
    can_cancel,
    can_read,
    can_start,
    dsmo_client,
)
from dsmo.server.ingress.problems import BODY_ERRORS, Problem, documented
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import InvalidRunId
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.events.resume_events import EventAck

router = APIRouter(prefix="/executions", tags=["executions"], route_class=StrictJsonRoute)


@router.post(
    "",
    status_code=201,
    summary="Start a run of a published agent definition",
    responses={**documented(404, 409), **BODY_ERRORS},
)
async def start(
    body: StartRequest,
    request: Request,
    response: Response,
    key: ApiKey = Depends(can_start),
    idempotency_key: str | None = Header(default=None),
    dsmo: DsmoClient = Depends(dsmo_client),
    settings: Settings = Depends(app_settings),
) -> dict[str, Any]:
    """201 with the new run; 200 `duplicate: true` (`eventsDelivered: 0`) for a retry of the same start.

    `version` names a published version by its hash or its label (404 `unknown_version`, or
    `unknown_agent` for an agent with nothing published; the latest when absent).

    An `Idempotency-Key` names one start of the key that sends it, whatever the body: its run's id
    is derived from the two alone, so Temporal's run-id uniqueness keeps it, and the run's memo
    keeps a digest of the body. The same body again is a retry; another body (another agent,
    input, events, ...) is a 409 `run_exists`, and so is a `runId` naming an existing run another
    request started; nothing is delivered. A `runId` with an `Idempotency-Key` is a 422 (each names
    the run). The start's events count against the key's event rate (429 with `Retry-After`);
    with no worker polling the task queue, a start with events is a 503 `no_worker` (nothing starts).
    `eventsDelivered` counts the events the run took (applied or kept), not duplicates; `events`
    holds the run's answer to each. A body JSON cannot hold (`NaN`, `1e400`, nesting past 64
    levels, an integer over 4300 digits) is a 400 `invalid_json` naming where it is. A debounced
    agent's start joins its key's batch (202); sent again with its `Idempotency-Key` and body while
    the batch's debouncer runs, it joins once and names the same run.
    """
    if idempotency_key is not None and not idempotency_key.strip():
        # Most often a client's variable left unset: taken as no key, every retry started a run.
        raise Problem(422, "invalid_body", "Idempotency-Key: blank; send a key that names this start, or none")
    definition = await _published(dsmo, body)
    for index, event in enumerate(body.events):
        if not key.allows(f"events:{event.type}"):
            raise Problem(403, "forbidden", f"events.{index}: key {key.name!r} lacks the scope 'events:{event.type}'")
    if definition.debounce is not None:  # its key's batch becomes one run, which the debouncer starts
        for field, given in (("runId", body.run_id), ("events", body.events)):
            if given:
                message = (
                    f"{field}: a start of {definition.agent!r} (debounced) takes none; its batch's run has its own"
                )
                raise Problem(422, "invalid_body", message)
    if body.events:  # the same budget as POST /executions/{id}/events: a start is no way around it
        start_idempotency.within_event_rate(request.app.state.event_rate, key, len(body.events))
    start = start_idempotency.start_fingerprint(key, idempotency_key, body) if idempotency_key else None
    run_id, debounced_key = body.run_id, None
    if idempotency_key:
        named = start_idempotency.idempotent_run_id(key, idempotency_key)
        try:
            kept = await start_idempotency.kept_start(dsmo, named)
        except RunNotFound:
            pass
        else:  # a retry, or a conflict: answered before any slot is claimed or event sent
            start_idempotency.same_start(named, kept, start, idempotency_key=idempotency_key)
            return _answer(settings, definition, named, acks=[], duplicate=True, response=response)
        if run_id is not None:
            raise Problem(
                422,
                "invalid_body",
                "runId: give a runId or an Idempotency-Key, not both (the Idempotency-Key names the run it starts)",
            )
        if definition.debounce is None:  # a debounced start's batch names its run
            run_id = named
        else:  # the body too: another body under the key is another start, never dropped as a retry
            debounced_key = f"{named}:{start}"
    events = [
        {
            "type": event.type,
            "event_id": event.event_id or start_idempotency.start_event_id(idempotency_key, index),
            "data": event.data,
        }
        for index, event in enumerate(body.events)
    ]
    flow: dict[str, Any] | None = None
    try:
        report = (
            await dsmo.start(
                definition,
                body.input,
                run_id=run_id,
                events=events,
                priority=body.priority,
                memo={start_idempotency.START_MEMO: start} if start else None,
                idempotency_key=debounced_key,  # a retry joins its batch once
            )
        ).started
    except EventNotAccepted as err:
        raise Problem(422, "invalid_event", str(err)) from None
    except RunAlreadyExists:
        if idempotency_key is None:
            raise Problem(409, "run_exists", f"runId: run {run_id!r} already exists; choose another runId") from None
        # Two starts with the same Idempotency-Key at once: Temporal let one through.
        await start_idempotency.same_start_as_run(dsmo, str(run_id), start, idempotency_key=idempotency_key)
        return _answer(settings, definition, str(run_id), acks=[], duplicate=True, response=response)
    if definition.concurrency:  # what the definition's flow control did with this start
        flow = {
            "status": report.status,
            "queuedBehind": report.queued_behind,
            "ahead": report.ahead,
            "cancelled": report.cancelled,
        }
    if report.status == "debounced":  # joined its key's batch: the run starts once the key is quiet
        response.status_code = 202
        flow = {"status": report.status, "gathered": report.gathered}
    if report.status == "delivered":  # onBusy: deliver: the key's active run took the events
        response.status_code = 200
        flow = {**(flow or {}), "acks": [ack.model_dump(mode="json") for ack in report.acks]}
    return _answer(settings, definition, report.run_id, acks=report.acks, duplicate=False, flow=flow)


async def _published(dsmo: DsmoClient, body: StartRequest) -> AgentDefinition:
    """The published definition a start names: its version by hash or label, as `dsmo start --version` takes it."""
    try:
        return await dsmo.definition(body.agent, body.version)
    except DefinitionNotFound as missing:
        if not body.version:
            raise Problem(404, "unknown_agent", str(missing)) from None
        try:  # only on this path: is it the agent or the version that is missing?
            await dsmo.versions(body.agent)
        except DefinitionNotFound as err:
            raise Problem(404, "unknown_agent", str(err)) from None
        raise Problem(404, "unknown_version", str(missing)) from None


def _answer(
    settings: Settings,
    definition: AgentDefinition,
    run_id: str,
    *,
    acks: list[EventAck],
    duplicate: bool,
    flow: dict[str, Any] | None = None,
    response: Response | None = None,
) -> dict[str, Any]:
    """The start's answer; a duplicate is a 200 that delivered nothing (the first start did)."""
    if duplicate and response is not None:
        response.status_code = 200
    return {
        "runId": run_id,
        "agent": definition.agent,
        "workflowVersion": definition.workflow_version,
        "url": settings.temporal.run_url(run_id),
        # What the run took (applied, or kept for a wait ahead): an event it had seen is no delivery.
        "eventsDelivered": sum(1 for ack in acks if ack.accepted and not ack.duplicate),
        "events": [ack.model_dump(mode="json") for ack in acks],
        "duplicate": duplicate,
        **({"flow": flow} if flow is not None else {}),
    }


@router.get("/{run_id}", summary="A run's status (its WAITING structure)", responses=documented(404))
async def status(run_id: str, _: ApiKey = Depends(can_read), dsmo: DsmoClient = Depends(dsmo_client)) -> dict[str, Any]:
    try:
        view = await dsmo.status(run_id)
    except RunNotFound as err:
        raise Problem(404, "run_not_found", str(err)) from None
    return view.model_dump(mode="json")


@router.get("", summary="List runs by status, waitingFor and agent")
async def list_runs(
    status: str | None = Query(default=None, pattern="^(pending|running|waiting|completed|failed|timeout|cancelled)$"),
    waiting_for: str | None = Query(default=None, alias="waitingFor", pattern="^[a-z]+$"),
    agent: str | None = Query(default=None, pattern="^[a-z0-9-]+$"),
    limit: int = Query(default=100, ge=1, le=1000),
    _: ApiKey = Depends(can_read),
    dsmo: DsmoClient = Depends(dsmo_client),
) -> dict[str, Any]:
    runs = [
        {
            "runId": row.run_id,
            "agent": row.agent or None,
            "status": row.status,
            "waitingFor": row.waiting_for,
            "waitingUntil": row.waiting_until.isoformat() if row.waiting_until else None,
            "startedAt": row.started_at.isoformat(),
        }
        async for row in dsmo.runs(status=status, agent=agent, waiting_for=waiting_for, limit=limit)
    ]
    return {"runs": runs}


@router.post(
    "/{run_id}/cancel",
    status_code=202,
    summary="Cancel a run that has not ended",
    responses={**documented(404, 409), **BODY_ERRORS},
)
async def cancel(
    run_id: str,
    body: CancelRequest,
    key: ApiKey = Depends(can_cancel),
    dsmo: DsmoClient = Depends(dsmo_client),
) -> dict[str, Any]:
    try:
        await dsmo.cancel(run_id, reason=body.reason, by=key.name)
    except RunNotFound as err:
        raise Problem(404, "run_not_found", str(err)) from None
    except RunClosed as err:
        raise Problem(409, "run_closed", str(err)) from None
    except InvalidRunId:
        raise
    except DsmoError as err:
        raise Problem(409, err.code, str(err)) from None
    return {"runId": run_id, "cancelRequested": True}
