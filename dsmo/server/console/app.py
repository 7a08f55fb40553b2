"""The console inside the ingress app: its routes, assets, error pages and objects.

`dsmo serve` serves the console at `/console/` beside the API, in the same process with the same
settings; `/` opens it. The guard in front of the API lets console paths through without an API
key header: the console signs people in with a key once and then uses its session cookie.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.task_counts import TaskCounts
from dsmo.config.settings import Settings
from dsmo.runtime.storage import ArtifactStore, s3_client
from dsmo.server.console import form_actions, live, pages, sealed_uploads
from dsmo.server.console.auth import CONSOLE, ConsoleProblem, SignInRequired, sign_in_url
from dsmo.server.console.definition_graphs import DefinitionGraphs
from dsmo.server.console.form_actions import SIGN_IN_FAILURE_BURST, SIGN_IN_FAILURES_PER_SECOND
from dsmo.server.console.run_page import GraphCache
from dsmo.server.console.session import Signer, load_secret
from dsmo.server.console.signed_out import SignedOut
from dsmo.server.console.web import HERE, Console, problem_page
from dsmo.server.token_buckets import TokenBuckets


def install_console(app: FastAPI, settings: Settings) -> None:
    """Add the console's routes, static assets and error pages to ``app``."""
    app.state.console_signer = Signer(load_secret(settings.api_keys_path))
    app.state.console_signed_out = SignedOut(settings.api_keys_path)
    app.state.sign_in_failures = TokenBuckets(SIGN_IN_FAILURES_PER_SECOND, SIGN_IN_FAILURE_BURST)
    app.mount(f"{CONSOLE}/static", StaticFiles(directory=str(HERE / "static")), name="console-static")
    app.include_router(pages.router)
    app.include_router(form_actions.router)
    app.include_router(sealed_uploads.router)
    app.include_router(live.router)
    app.add_api_route("/", pages.root_redirect, include_in_schema=False)
    app.add_api_route(CONSOLE, lambda: RedirectResponse(f"{CONSOLE}/", status_code=308), include_in_schema=False)

    @app.exception_handler(SignInRequired)
    async def sign_in(_: Request, err: SignInRequired) -> RedirectResponse:
        return RedirectResponse(sign_in_url(err.next_path), status_code=303)

    @app.exception_handler(ConsoleProblem)
    async def problem(request: Request, err: ConsoleProblem) -> HTMLResponse:
        return problem_page(request, err.status, err.message)


def open_console(app: FastAPI, settings: Settings, dsmo: DsmoClient) -> None:
    """Create the objects the console uses, once the app's client is connected."""
    s3 = s3_client(settings)
    store = ArtifactStore(s3, settings.store.bucket, keks=settings.codec.subject_keks(settings.state_dir))
    app.state.console = Console(dsmo, settings, s3, store, GraphCache(store), DefinitionGraphs(), TaskCounts())
