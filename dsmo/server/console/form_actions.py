"""What the console's forms do: sign in and out, deliver an event, finish an upload, cancel or rewind a run.

Signing in is limited per client address: after `SIGN_IN_FAILURE_BURST` wrong keys, one more
try every 6 s (429 and a logged warning until then). Signing out ends the session for good.

Every POST checks its CSRF token first, then the key's scope for what it does. Events go
through DsmoClient.deliver_event like every other way in (`well_formed` before sending, then the
run's validated `deliver_event` update) with the event id fixed when the form was rendered, so a
second submit of the same form is acknowledged as a duplicate. A rewind goes through
DsmoClient.rewind; a refusal (one line, nothing written) is shown on the run page with the form
as it was filled.
"""

from __future__ import annotations

import asyncio
import logging
import math
from urllib.parse import quote

from botocore.exceptions import ClientError
from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from dsmo.client.client_errors import (
    EventMalformed,
    EventNotAccepted,
    RewindNotAccepted,
    RunClosed,
    RunNotFound,
)
from dsmo.client.run_corrections import assignments_of
from dsmo.server.api_keys import DECISION_EVENTS, KeyStore
from dsmo.server.console.auth import (
    CONSOLE,
    CSRF_FIELD,
    ConsoleProblem,
    Viewer,
    check_csrf,
    cookie_options,
    safe_next,
    signed_in,
    signer,
)
from dsmo.server.console.forms import FORMS, event_data, field_errors
from dsmo.server.console.pages import run_context
from dsmo.server.console.session import PRESESSION_COOKIE, SESSION_COOKIE
from dsmo.server.console.signed_out import SignedOut
from dsmo.server.console.uploads import return_valid, upload_prefix
from dsmo.server.console.web import checked_run_id, console, render
from dsmo.server.token_buckets import TokenBuckets
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.events.resume_events import EventAck, EventRejected

router = APIRouter(prefix=CONSOLE, include_in_schema=False)
log = logging.getLogger("dsmo.console")
# Wrong keys one client address may try at the sign-in: a burst, then one more every 6 s.
SIGN_IN_FAILURE_BURST, SIGN_IN_FAILURES_PER_SECOND = 10, 1 / 6


def run_url(run_id: str, notice: str) -> str:
    return f"{CONSOLE}/runs/{quote(run_id, safe='')}?notice={notice}"


def changed_run(request: Request, run_id: str, notice: str) -> RedirectResponse:
    """To the run's page after a form changed the run; the task list's totals are counted afresh."""
    console(request).task_counts.forget()
    return RedirectResponse(run_url(run_id, notice), status_code=303)


def ack_notice(ack: EventAck) -> str:
    return "duplicate" if ack.duplicate else "kept" if ack.buffered else "delivered"


def require_scope(viewer: Viewer, scope: str) -> None:
    if not viewer.allows(scope):
        raise ConsoleProblem(403, f"key {viewer.key.name!r} lacks the scope {scope!r}")


def within_event_rate(request: Request, viewer: Viewer) -> None:
    """The key's event rate, shared with the API's event route (DSMO_INGRESS_EVENTS_PER_SECOND)."""
    rate: TokenBuckets = request.app.state.event_rate
    wait = rate.take(viewer.key.name)
    if wait > 0:
        raise ConsoleProblem(
            429, f"key {viewer.key.name!r} sends events faster than its limit; retry in {math.ceil(wait)} s"
        )


@router.post("/login", response_model=None)
async def login(
    request: Request,
    api_key: str = Form(default=""),
    next: str = Form(default=""),
    csrf_token: str = Form(default="", alias=CSRF_FIELD),
) -> Response:
    binding = request.cookies.get(PRESESSION_COOKIE, "")
    if not binding or not signer(request).csrf_valid(csrf_token, f"presession:{binding}"):
        raise ConsoleProblem(403, f"{CSRF_FIELD}: missing or not issued to this browser; reload the page and retry")
    failures: TokenBuckets = request.app.state.sign_in_failures
    address = request.client.host if request.client else "unknown"
    context = {"csrf": signer(request).csrf_token(f"presession:{binding}"), "next": safe_next(next), "viewer": None}
    wait = failures.waiting(address)
    if wait > 0:
        log.warning("console sign-in from %s refused: too many wrong keys; next try in %d s", address, math.ceil(wait))
        message = f"too many wrong keys from this address; try again in {math.ceil(wait)} s"
        page = render(request, "login.html", {**context, "errors": {"api_key": message}}, 429)
        page.headers["retry-after"] = str(math.ceil(wait))
        return page
    keys: KeyStore = request.app.state.keys
    key = keys.verify(api_key.strip()) if api_key.strip() else None
    if key is None:
        if api_key.strip():
            failures.take(address)
        errors = {"api_key": "unknown API key" if api_key.strip() else "enter your API key"}
        return render(request, "login.html", {**context, "errors": errors}, 401)
    answer = RedirectResponse(safe_next(next), status_code=303)
    answer.set_cookie(SESSION_COOKIE, signer(request).session_cookie(key.name, key.key_hash), **cookie_options(request))  # type: ignore[arg-type]
    answer.delete_cookie(PRESESSION_COOKIE, path=CONSOLE)
    return answer


@router.post("/logout")
async def logout(
    request: Request, viewer: Viewer = Depends(signed_in), csrf_token: str = Form(default="", alias=CSRF_FIELD)
) -> RedirectResponse:
    check_csrf(viewer, csrf_token)
    ended: SignedOut = request.app.state.console_signed_out
    await asyncio.to_thread(ended.add, viewer.session.session_id, viewer.session.expires)
    answer = RedirectResponse(f"{CONSOLE}/login?notice=signed-out", status_code=303)
    answer.delete_cookie(SESSION_COOKIE, path=CONSOLE)
    return answer


@router.post("/runs/{run_id}/events", response_model=None)
async def deliver(request: Request, run_id: str, viewer: Viewer = Depends(signed_in)) -> Response:
    filled = {name: value for name, value in (await request.form()).items() if isinstance(value, str)}
    check_csrf(viewer, filled.get(CSRF_FIELD))
    checked_run_id(run_id)
    form = next((form for form in FORMS.values() if form.event_type == filled.get("event_type")), None)
    if form is None or not form.fields:
        raise ConsoleProblem(422, "event_type: not an event this console's forms deliver")
    require_scope(viewer, f"events:{form.event_type}")
    within_event_rate(request, viewer)
    event_id = filled.get("event_id", "")
    malformed: EventRejected | None = None
    errors: dict[str, str] = {}
    try:
        data = event_data(form, filled)
        if form.event_type in DECISION_EVENTS:  # who decided: the signed-in key
            data["by"] = f"console:{viewer.key.name}"
        ack = await console(request).dsmo.deliver_event(run_id, form.event_type, data, event_id=event_id)
        return changed_run(request, run_id, ack_notice(ack))
    except EventMalformed as err:  # refused before it was sent, in the words every way in gets
        malformed = err.problem
    except EventRejected as err:  # the form's own reading of a field (a decision's JSON)
        malformed = err
    except EventNotAccepted as err:
        errors = {"_form": str(err)}
    except (RunNotFound, RunClosed) as err:
        raise ConsoleProblem(409 if isinstance(err, RunClosed) else 404, str(err)) from None
    # Shown again with what was typed, the errors beside their fields and the same event id. The
    # page shows the form of the run's wait now, which is not the one sent if the page was stale.
    context = await run_context(request, viewer, run_id)
    if malformed is not None:
        errors = field_errors(context["form"], malformed)
    context.update(errors=errors, values=filled, event_id=event_id or context["event_id"])
    return render(request, "run.html", context, 422)


@router.get("/runs/{run_id}/uploaded/{document}/{event_id}/{signature}")
async def uploaded(
    request: Request,
    run_id: str,
    document: str,
    event_id: str,
    signature: str,
    key: str = "",
    bucket: str = "",
    viewer: Viewer = Depends(signed_in),
) -> RedirectResponse:
    require_scope(viewer, "events:DOCUMENT_UPLOADED")
    checked_run_id(run_id)
    if not return_valid(viewer.signer, viewer.session.binding, run_id, document, event_id, signature):
        raise ConsoleProblem(403, "upload: this return address was not issued to this session")
    app = console(request)
    within_event_rate(request, viewer)
    if bucket != app.settings.store.bucket or not key.startswith(upload_prefix(run_id, event_id)):
        raise ConsoleProblem(422, "key: not an object of this upload")
    try:
        await asyncio.to_thread(app.s3.head_object, Bucket=bucket, Key=key)
    except ClientError:
        raise ConsoleProblem(422, f"key: {key!r} is not in the store; upload the file again") from None
    data = {"document": document, "url": app.store.uri(key)}
    try:
        ack = await app.dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", data, event_id=event_id)
    except DsmoError as err:
        raise ConsoleProblem(409, str(err)) from None
    return changed_run(request, run_id, ack_notice(ack))


@router.post("/runs/{run_id}/cancel", response_model=None)
async def cancel(
    request: Request,
    run_id: str,
    viewer: Viewer = Depends(signed_in),
    reason: str = Form(default=""),
    csrf_token: str = Form(default="", alias=CSRF_FIELD),
) -> HTMLResponse | RedirectResponse:
    check_csrf(viewer, csrf_token)
    require_scope(viewer, "cancel")
    checked_run_id(run_id)
    if not reason.strip():
        context = await run_context(request, viewer, run_id)
        context["errors"] = {"reason": "give a reason: it is kept in the audit trail"}
        return render(request, "run.html", context, 422)
    try:
        await console(request).dsmo.cancel(run_id, reason=reason.strip()[:500], by=f"console:{viewer.key.name}")
    except DsmoError as err:
        raise ConsoleProblem(409, str(err)) from None
    return changed_run(request, run_id, "cancelled")


@router.post("/runs/{run_id}/rewind", response_model=None)
async def rewind(
    request: Request,
    run_id: str,
    viewer: Viewer = Depends(signed_in),
    to_node: str = Form(default=""),
    corrections: str = Form(default=""),
    reason: str = Form(default=""),
    compensate: str = Form(default=""),
    csrf_token: str = Form(default="", alias=CSRF_FIELD),
) -> HTMLResponse | RedirectResponse:
    check_csrf(viewer, csrf_token)
    require_scope(viewer, "operate")
    checked_run_id(run_id)
    filled = {"to_node": to_node, "corrections": corrections, "reason": reason, "compensate": bool(compensate)}
    try:
        if not reason.strip():
            raise DsmoError("reason: say why the run goes back; it is recorded in the trail")
        lines = [line for line in corrections.splitlines() if line.strip()]
        await console(request).dsmo.rewind(
            run_id,
            to_node,
            reason=reason.strip()[:500],
            set_variables=assignments_of(lines, "corrections"),
            compensate=bool(compensate),
            by=f"console:{viewer.key.name}",
        )
    except RunNotFound as err:
        raise ConsoleProblem(404, str(err)) from None
    except (RunClosed, RewindNotAccepted) as err:
        return await _rewind_refused(request, viewer, run_id, filled, str(err), 409)
    except DsmoError as err:
        return await _rewind_refused(request, viewer, run_id, filled, str(err), 422)
    return changed_run(request, run_id, "rewound")


async def _rewind_refused(
    request: Request, viewer: Viewer, run_id: str, filled: dict[str, object], refusal: str, status: int
) -> HTMLResponse:
    """The run page again, the rewind form open as it was filled and the refusal above it."""
    context = await run_context(request, viewer, run_id)
    if not context["rewind"]["targets"]:  # no form on the page now (the run no longer waits): the refusal alone
        raise ConsoleProblem(status, refusal)
    context["rewind"] = {**context["rewind"], **filled, "error": refusal}
    return render(request, "run.html", context, status)
