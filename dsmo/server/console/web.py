"""What the console's routes share: its templates, its objects on ``app.state``, notices, times.

Templates are Jinja2 with autoescaping on: every value a run or a person supplied is escaped
when rendered. The only markup inserted raw is the graph's SVG, which escapes its own labels.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.run_status import spend_line
from dsmo.client.task_counts import TaskCounts
from dsmo.config.settings import Settings
from dsmo.runtime.storage import ArtifactStore
from dsmo.server.console.auth import CONSOLE, ConsoleProblem, Viewer, current_viewer
from dsmo.server.console.definition_graphs import DefinitionGraphs
from dsmo.server.console.run_page import GraphCache
from dsmo.workflows.common.identifiers import run_id_problem

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

HERE = Path(__file__).resolve().parent
TEMPLATES = Jinja2Templates(directory=str(HERE / "templates"))

# What a redirect after a form says: fixed messages by code, so no text travels in the URL.
NOTICES = {
    "delivered": "Delivered: the run took it.",
    "kept": "Delivered: the run keeps it for a wait ahead.",
    "duplicate": "Already delivered: this form was sent before, nothing was applied twice.",
    "cancelled": "Cancel requested.",
    "rewound": "Sent back: the run goes back to the node; what it undid is in its trail (RUN_REWOUND).",
    "signed-out": "Signed out.",
}


@dataclass(frozen=True)
class Console:
    """The objects the console's routes use, created when the app starts serving."""

    dsmo: DsmoClient
    settings: Settings
    s3: S3Client
    store: ArtifactStore
    graphs: GraphCache
    drawings: DefinitionGraphs
    task_counts: TaskCounts


def console(request: Request) -> Console:
    """The app's console objects."""
    found: Console = request.app.state.console
    return found


def checked_run_id(run_id: str) -> None:
    """Refuse a malformed run id with a page, before it reaches Temporal."""
    problem = run_id_problem(run_id)
    if problem:
        raise ConsoleProblem(422, f"run: {problem}")


def since(moment: datetime | None, now: datetime | None = None) -> str:
    """A short age: ``3d 4h``, ``5m``, ``12s`` (empty for no time)."""
    if moment is None:
        return ""
    seconds = int(((now or datetime.now(UTC)) - moment).total_seconds())
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{sign}{days}d {hours}h"
    if hours:
        return f"{sign}{hours}h {minutes}m"
    return f"{sign}{minutes}m" if minutes else f"{sign}{seconds}s"


def when(moment: datetime | None) -> str:
    """A time as people read it, in UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if moment else ""


def pretty(value: Any) -> str:
    """JSON for people: indented, non-ASCII kept; a plain string, so the template escapes it."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


TEMPLATES.env.filters["pretty"] = pretty
TEMPLATES.env.filters["since"] = since
TEMPLATES.env.filters["when"] = when
TEMPLATES.env.filters["spent"] = spend_line


def is_console_path(path: str) -> bool:
    """Whether ``path`` is the console's (its errors are pages, not the API's JSON)."""
    return path == CONSOLE or path.startswith(f"{CONSOLE}/")


def problem_document(status: int, message: str, viewer: Viewer | None = None) -> str:
    """The console's error page as HTML text, for answers made outside a route (the guard)."""
    return TEMPLATES.get_template("problem.html").render(viewer=viewer, status=status, message=message, notice=None)


def problem_page(request: Request, status: int, message: str) -> HTMLResponse:
    """The console's error page for a request: the problem in one line, the viewer's menu kept."""
    try:
        viewer = current_viewer(request)
    except Exception:  # noqa: BLE001 - the page reports an error; it must not fail on the menu
        viewer = None
    context = {"viewer": viewer, "status": status, "message": message}
    return render(request, "problem.html", context, status)


def security_headers(form_targets: str = "") -> dict[str, str]:
    """Headers of every console page: never cached or framed, no outside scripts."""
    return {
        "cache-control": "no-store",
        "x-frame-options": "DENY",
        "content-security-policy": (
            "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
            f"form-action 'self'{' ' + form_targets if form_targets else ''}; frame-ancestors 'none'"
        ),
        "referrer-policy": "same-origin",
    }


def render(request: Request, template: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    """A page; every page gets the viewer (if any) and the notice named in the URL."""
    notice = NOTICES.get(request.query_params.get("notice", ""))
    page: HTMLResponse = TEMPLATES.TemplateResponse(
        request, template, {"notice": notice, **context}, status_code=status
    )
    # Pages hold CSRF tokens and run data: never cached, never framed, no outside scripts.
    # Uploads post straight to the object store, so its address is a form target too.
    opened: Console | None = getattr(request.app.state, "console", None)
    page.headers.update(security_headers(opened.settings.store.endpoint if opened else ""))
    return page
