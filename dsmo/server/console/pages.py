"""The console's pages: sign-in, the task list, a run, the definitions and a diff of two versions."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from dsmo.client.client_errors import DefinitionNotFound, RunNotFound
from dsmo.client.stream_positions import position_after
from dsmo.client.task_list import PERSON_WAITS, FilterError, TaskFilter, task_page
from dsmo.client.trail_pages import page_of
from dsmo.runtime.storage import ArtifactErased, ArtifactMissing
from dsmo.server.console.auth import (
    CONSOLE,
    CSRF_FIELD,
    ConsoleProblem,
    Viewer,
    cookie_options,
    presession,
    safe_next,
    signer,
    viewer_with,
)
from dsmo.server.console.forms import FORMS
from dsmo.server.console.graph_layout import edges
from dsmo.server.console.live import tasks_digest
from dsmo.server.console.open_runs import open_runs
from dsmo.server.console.run_page import load_run_page, run_of_key
from dsmo.server.console.session import PRESESSION_COOKIE
from dsmo.server.console.uploads import UploadForm, return_path, sealed_upload_path, upload_form
from dsmo.server.console.web import Console, checked_run_id, console, problem_page, render
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import StatusView

TRAIL_PAGE = 200  # trail events on a run page: its size stays bounded whatever the trail's length

router = APIRouter(prefix=CONSOLE, include_in_schema=False)
can_read = viewer_with("read")


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request, next: str | None = None) -> HTMLResponse:
    binding, fresh = presession(request)
    page = render(
        request,
        "login.html",
        {"csrf": signer(request).csrf_token(f"presession:{binding}"), "next": safe_next(next), "viewer": None},
    )
    if fresh:
        page.set_cookie(PRESESSION_COOKIE, binding, **cookie_options(request))  # type: ignore[arg-type]
    return page


@router.get("/", response_class=HTMLResponse)
async def tasks(
    request: Request,
    viewer: Viewer = Depends(can_read),
    kind: str = "",
    agent: str = "",
    assignee: str = "",
    overdue: bool = False,
    run: str = "",
    page: str = "",
) -> HTMLResponse:
    app = console(request)
    now = datetime.now(UTC)
    filters = TaskFilter(kind or None, agent or None, assignee or None, overdue, run or None)
    context: dict[str, Any] = {"viewer": viewer, "filters": filters, "kinds": PERSON_WAITS, "now": now}
    try:
        context["page"] = await task_page(app.dsmo.core, filters, now, page=page or None, counts=app.task_counts)
        context["digest"] = tasks_digest(context["page"])
    except FilterError as err:
        field = str(err).split(":", 1)[0]
        return render(request, "tasks.html", {**context, "page": None, "errors": {field: str(err)}}, 422)
    context["errors"] = {}
    return render(request, "tasks.html", context)


async def run_context(
    request: Request, viewer: Viewer, run_id: str, *, after: str = "", before: str = ""
) -> dict[str, Any]:
    """What the run template needs; a form's event id is fixed here, when the page is rendered.

    The trail shows one page (`trail_pages`): the latest events, or those around the cursor.
    """
    checked_run_id(run_id)
    cursors = {name: _cursor(name, value) for name, value in (("after", after), ("before", before))}
    app = console(request)
    try:
        page = await load_run_page(app.dsmo, app.graphs, app.s3, app.store, run_id)
        trail = page_of(page.trail, limit=TRAIL_PAGE, **cursors)
    except RunNotFound as err:
        raise ConsoleProblem(404, str(err)) from None
    except DsmoError as err:
        raise ConsoleProblem(422, str(err)) from None
    view = page.view
    form = FORMS.get(view.waiting_for or "") if view.status.value == "waiting" else None
    uploads: list[UploadForm] = []
    if form is not None and form.wait == "document" and viewer.allows(f"events:{form.event_type}"):
        # A run about a data subject gets its documents through the console, sealed (sealed_uploads.py).
        sealed = bool(page.trail) and "subject" in page.trail[0].data
        waiting = view.waiting_data or {}
        uploads = await asyncio.to_thread(_upload_forms, request, app, viewer, run_id, waiting, sealed=sealed)
    return {
        "viewer": viewer,
        "page": page,
        "trail": trail,
        "view": view,
        "form": form,
        "form_allowed": form is not None and viewer.allows(f"events:{form.event_type}"),
        "event_id": f"console-{uuid.uuid4().hex}",
        "uploads": uploads,
        "values": {
            control.name: _shown((view.waiting_data or {}).get(control.default_from, ""))
            for control in (form.fields if form else ())
            if control.default_from
        },
        "errors": {},
        "rewind": {
            "targets": rewind_targets(view) if viewer.allows("operate") else [],
            "to_node": "",
            "corrections": "",
            "reason": "",
            "compensate": True,
            "error": None,
        },
        "web_ui": app.settings.temporal.run_url(run_id),
        # Where the page's live stream starts: after the trail it shows, with the stage attempts
        # still open then read from their start (a model's answer under way is shown whole).
        "stream_after": position_after(page.trail),
        "now": datetime.now(UTC),
    }


def _cursor(name: str, value: str) -> int | None:
    if not value:
        return None
    if not value.isdigit():
        raise ConsoleProblem(422, f"{name}: must be a sequence number, got {value[:40]!r}")
    return int(value)


def rewind_targets(view: StatusView) -> list[str]:
    """The nodes a waiting run can be sent back to: those on its path before where it waits now.

    The run checks again itself (a node it entered before it kept where it can go back to is
    refused with the reason); the list only leaves out what cannot be a target at all.
    """
    if view.status is not RunStatus.WAITING:
        return []
    # The path ends at the node the run waits at; an earlier visit of that node (a loop) is a target.
    earlier = view.path[:-1] if view.path and view.path[-1] == view.current_node else view.path
    return list(dict.fromkeys(earlier))


def _upload_forms(
    request: Request, app: Console, viewer: Viewer, run_id: str, waiting: dict[str, Any], *, sealed: bool = False
) -> list[UploadForm]:
    received = set(waiting.get("received", []))
    forms = []
    for document in waiting.get("documents", []):
        if document in received:
            continue
        event_id = f"console-{uuid.uuid4().hex}"
        back = return_path(viewer.signer, viewer.session.binding, run_id, document, event_id)
        if sealed:
            forms.append(UploadForm(document, event_id, sealed_upload_path(back), {CSRF_FIELD: viewer.csrf()}))
            continue
        return_url = str(request.base_url).rstrip("/") + back
        forms.append(
            upload_form(
                app.s3,
                app.settings.store.bucket,
                return_url=return_url,
                run_id=run_id,
                document=document,
                event_id=event_id,
            )
        )
    return forms


@router.get("/runs/{run_id}", response_class=HTMLResponse)
async def run_page(
    request: Request, run_id: str, after: str = "", before: str = "", viewer: Viewer = Depends(can_read)
) -> HTMLResponse:
    return render(request, "run.html", await run_context(request, viewer, run_id, after=after, before=before))


@router.get("/runs/{run_id}/artifacts/{key:path}")
async def run_artifact(request: Request, run_id: str, key: str, viewer: Viewer = Depends(can_read)) -> Response:
    """One of a run's sealed objects, opened (its presigned link would give the ciphertext)."""
    checked_run_id(run_id)
    if run_of_key(key) != run_id or ".." in key.split("/"):
        return problem_page(request, 404, f"{key}: not an object of run {run_id}")
    store = console(request).store
    try:
        body = await asyncio.to_thread(store.read_bytes, store.uri(key))
    except ArtifactErased:
        return problem_page(request, 410, f"{key}: erased (the run's data subject was erased)")
    except ArtifactMissing:
        return problem_page(request, 404, f"{key}: not found (removed by retention, or never written)")
    return Response(body, media_type="application/json")


@router.get("/definitions", response_class=HTMLResponse)
async def definitions(request: Request, viewer: Viewer = Depends(can_read)) -> HTMLResponse:
    agents = await console(request).dsmo.definitions()
    return render(request, "definitions.html", {"viewer": viewer, "agents": agents})


@router.get("/definitions/{agent}", response_class=HTMLResponse)
async def definition(
    request: Request, agent: str, viewer: Viewer = Depends(can_read), version: str = "", compare: str = ""
) -> HTMLResponse:
    app = console(request)
    try:
        versions = await app.dsmo.versions(agent)
        shown = await app.dsmo.definition(agent, version or None)
        older = await app.dsmo.definition(agent, compare) if compare else None
    except DefinitionNotFound as err:
        raise ConsoleProblem(404, str(err)) from None
    drawn, runs = await asyncio.gather(app.drawings.get(shown, older), open_runs(app.dsmo, agent, versions))
    context: dict[str, Any] = {
        "viewer": viewer,
        "agent": agent,
        "versions": versions,
        "shown": shown,
        "compare": older,
        "graph_svg": drawn.svg,
        "graph_plain": drawn.plain,
        "node_count": len(shown.nodes),
        "edge_count": len(edges(shown)),
        "changes": drawn.changes,
        "open_runs": runs,
    }
    return render(request, "definition.html", context)


def root_redirect() -> RedirectResponse:
    """``/`` opens the console's task list (which asks for a sign-in first when needed).

    The session cookie is scoped to ``/console``, so ``/`` itself cannot tell who is signed in.
    """
    return RedirectResponse(f"{CONSOLE}/", status_code=303)


def _shown(value: Any) -> str:
    """A wait's value as a form field shows it: an object or a list as JSON, the rest as text."""
    return json.dumps(value, indent=2, ensure_ascii=False) if isinstance(value, dict | list) else str(value)
