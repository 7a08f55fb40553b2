"""The ingress API: start runs from published definitions, deliver resume events, read, cancel.

The console for people (`/console/`, `/` opens it) is served by the same app; see
`dsmo.server.console.app`. Every API route needs an API key (`Authorization: Bearer <key>`
or `X-API-Key`) with the route's scope. Bodies are capped in size. Errors are JSON:
`{"error": {"code": ..., "message": ...}}`.
The API description (`/docs`, Swagger UI from the package, and `/openapi.json`) follows
`DSMO_INGRESS_DOCS`: behind the `read` scope (default), public, or off. The routes live in one
router per resource (`executions.py`, `event_routes.py`, `stream_routes.py`, `hook_routes.py`); this module
assembles them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import swagger_ui_bundle
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.server.api_keys import KeyStore
from dsmo.server.console.app import install_console, open_console
from dsmo.server.console.uploads import MAX_UPLOAD_BYTES
from dsmo.server.ingress import event_routes, executions, hook_routes, run_changes, stream_routes
from dsmo.server.ingress.guard import DOC_ASSETS, IngressGuard, protect_access_log
from dsmo.server.ingress.problems import COMMON_ERRORS, error_response, install_error_handlers
from dsmo.server.ingress.start_idempotency import RateLimited
from dsmo.server.token_buckets import TokenBuckets

MAX_BODY_BYTES = 64 * 1024


def create_app(settings: Settings) -> FastAPI:
    """The ingress as an ASGI app; it connects to Temporal and S3 when it starts serving.

    Args:
        settings: Where Temporal, S3 and the API key file are, and the ingress's own options.

    Returns:
        The FastAPI app, ready for uvicorn (`dsmo serve` runs it).
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.dsmo = await DsmoClient.connect(settings)
        open_console(app, settings, app.state.dsmo)
        yield

    app = FastAPI(
        title="DSMO ingress",
        version="1.0.0",
        description="Start agent executions, deliver resume events and read their status over HTTP.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None if settings.ingress.docs == "off" else "/openapi.json",
    )
    app.state.settings = settings
    app.state.keys = KeyStore(settings.api_keys_path)
    # One rate per key for events, whether they come through the API or the console's forms.
    app.state.event_rate = TokenBuckets(settings.ingress.events_per_second, settings.ingress.event_burst)
    app.state.streams_by_key = {}  # key name -> live streams it holds open (stream_routes.py)

    # Outermost: no key, no body read; a body is read only up to the cap, chunked or not.
    app.add_middleware(
        IngressGuard,
        keys=app.state.keys,
        max_body=MAX_BODY_BYTES,
        upload_max_body=MAX_UPLOAD_BYTES + 64 * 1024,  # the file and the form around it
        docs=settings.ingress.docs,
        event_rate=app.state.event_rate,
        body_timeout=settings.ingress.body_timeout,
    )
    protect_access_log()
    if settings.ingress.docs != "off":
        _serve_docs(app)
    install_error_handlers(app)
    _answer_rate_limits(app)
    routers = (executions.router, run_changes.router, event_routes.router, stream_routes.router, hook_routes.router)
    for router in routers:
        app.include_router(router, responses=COMMON_ERRORS)
    install_console(app, settings)
    return app


def _answer_rate_limits(app: FastAPI) -> None:
    """A 429 raised by a route (a start's events) carries `Retry-After`, as the guard's own 429 does."""

    @app.exception_handler(RateLimited)
    async def rate_limited(request: Request, err: RateLimited) -> JSONResponse:
        answer = error_response(err.status, err.code, err.message)
        answer.headers["Retry-After"] = str(err.retry_after)
        return answer


def _serve_docs(app: FastAPI) -> None:
    """Swagger UI from the installed package (no CDN), at /docs."""
    app.mount(DOC_ASSETS.rstrip("/"), StaticFiles(directory=str(swagger_ui_bundle.swagger_ui_path)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{app.title} - API",
            swagger_js_url=f"{DOC_ASSETS}swagger-ui-bundle.js",
            swagger_css_url=f"{DOC_ASSETS}swagger-ui.css",
            swagger_favicon_url=f"{DOC_ASSETS}favicon-32x32.png",
        )
