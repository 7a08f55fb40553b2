"""The ingress API: start runs from published definitions, deliver resume events, read, cancel.

Every route needs an API key (`Authorization: Bearer <key>` or `X-API-Key`) with the route's
scope. Bodies are capped in size. Errors are JSON: `{"error": {"code": ..., "message": ...}}`.
The API description (`/docs`, Swagger UI from the package, and `/openapi.json`) follows
`DSMO_INGRESS_DOCS`: behind the `read` scope (default), public, or off.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import swagger_ui_bundle
from fastapi import Depends, FastAPI, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.definitions import DefinitionStore
from dsmo.activities.processors import UnknownAgent
from dsmo.starter.client.dsmo_client import DsmoClient, EventNotAccepted, RunAlreadyExists, RunClosed, RunNotFound
from dsmo.starter.ingress.guard import DOC_ASSETS, IngressGuard, protect_access_log
from dsmo.starter.ingress.keys import ApiKey, KeyStore
from dsmo.starter.ingress.rate_limit import TokenBuckets
from dsmo.starter.settings import Settings
from dsmo.starter.storage import s3_client
from dsmo.workflows import search_attributes as sa
from dsmo.workflows.errors import DsmoError
from dsmo.workflows.events import EventRejected, parse_update
from dsmo.workflows.identifiers import AGENT_NAME_PATTERN, RUN_ID_PATTERN, WORKFLOW_VERSION_PATTERN, InvalidRunId
from dsmo.workflows.wire import to_camel

MAX_BODY_BYTES = 64 * 1024


class _Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class StartRequest(_Body):
    agent: str = Field(pattern=f"^{AGENT_NAME_PATTERN}$", examples=["candidate-screening"])
    version: str | None = Field(
        default=None,
        pattern=f"^{WORKFLOW_VERSION_PATTERN}$",
        description="a published workflow_version (default: the latest)",
    )
    input: dict[str, Any] = Field(default_factory=dict)
    run_id: str | None = Field(default=None, pattern=f"^{RUN_ID_PATTERN}$")


class EventRequest(_Body):
    model_config = ConfigDict(alias_generator=None, populate_by_name=True, extra="forbid")
    type: str = Field(examples=["MESSAGE_RECEIVED"])
    event_id: str | None = Field(default=None, max_length=200, description="or the Idempotency-Key header")
    data: dict[str, Any] = Field(default_factory=dict, examples=[{"text": "Sí, sigo interesada"}])


class CancelRequest(_Body):
    reason: str = Field(min_length=1, max_length=500)


class Problem(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"code": code, "message": message}})


def create_app(settings: Settings) -> FastAPI:
    keys = KeyStore(settings.api_keys_path)
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        state["dsmo"] = await DsmoClient.connect(settings)
        state["definitions"] = DefinitionStore(ArtifactStore(s3_client(settings), settings.artifact_bucket))
        yield

    app = FastAPI(
        title="DSMO ingress",
        version="1.0.0",
        description="Start agent executions, deliver resume events and read their status over HTTP.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None if settings.ingress_docs == "off" else "/openapi.json",
    )

    # Outermost: no key, no body read; a body is read only up to the cap, chunked or not.
    app.add_middleware(
        IngressGuard,
        keys=keys,
        max_body=MAX_BODY_BYTES,
        docs=settings.ingress_docs,
        event_rate=TokenBuckets(settings.ingress_events_per_second, settings.ingress_event_burst),
    )
    protect_access_log()
    if settings.ingress_docs != "off":
        _serve_docs(app)

    @app.exception_handler(Problem)
    async def problem(_: Request, err: Problem) -> JSONResponse:
        return _error(err.status, err.code, err.message)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, err: StarletteHTTPException) -> JSONResponse:
        # Routing's own answers (unknown path, wrong method) in the documented shape, not {"detail": ...}.
        codes = {404: "not_found", 405: "method_not_allowed"}
        return _error(err.status_code, codes.get(err.status_code, "http_error"), str(err.detail))

    @app.exception_handler(InvalidRunId)
    async def bad_run_id(_: Request, err: InvalidRunId) -> JSONResponse:
        return _error(422, err.code, str(err))

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        first = err.errors()[0]
        field = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or "body"
        return _error(422, "invalid_body", f"{field}: {first.get('msg', 'invalid')}")

    def caller(scope: str) -> Callable[..., ApiKey]:
        def check(
            authorization: str | None = Header(default=None), x_api_key: str | None = Header(default=None)
        ) -> ApiKey:
            presented = x_api_key or (authorization or "").removeprefix("Bearer ").strip()
            if not presented:
                raise Problem(401, "unauthenticated", "send an API key: Authorization: Bearer <key> or X-API-Key")
            key = keys.verify(presented)
            if key is None:
                raise Problem(401, "unauthenticated", "unknown API key")
            if not key.allows(scope):
                raise Problem(403, "forbidden", f"key {key.name!r} lacks the scope {scope!r}")
            return key

        return check

    def dsmo() -> DsmoClient:
        client: DsmoClient = state["dsmo"]
        return client

    @app.post("/executions", status_code=201, summary="Start a run of a published agent definition")
    async def start(
        body: StartRequest,
        response: Response,
        key: ApiKey = Depends(caller("start")),
        idempotency_key: str | None = Header(default=None),
    ) -> dict[str, Any]:
        try:
            definition = state["definitions"].resolve(body.agent, body.version)
        except UnknownAgent as err:
            raise Problem(404, "unknown_agent", str(err)) from None
        run_id = body.run_id
        if run_id is None and idempotency_key:
            # The same key from the same caller starts one run; a retry gets that run back.
            digest = hashlib.sha256(f"{key.name}\x1f{idempotency_key}".encode()).hexdigest()[:16]
            run_id = f"{definition.agent}-{digest}"
        try:
            run_id = await dsmo().start(definition, body.input, run_id=run_id)
        except RunAlreadyExists:
            if not idempotency_key:
                raise Problem(409, "run_exists", f"run {run_id!r} already exists") from None
            response.status_code = 200
        return {
            "runId": run_id,
            "agent": definition.agent,
            "workflowVersion": definition.workflow_version,
            "url": settings.run_url(str(run_id)),
        }

    @app.post("/executions/{run_id}/events", status_code=202, summary="Deliver a resume event to a run")
    async def deliver(
        run_id: str,
        body: EventRequest,
        request: Request,
        idempotency_key: str | None = Header(default=None),
    ) -> dict[str, Any]:
        caller(f"events:{body.type}")(request.headers.get("authorization"), request.headers.get("x-api-key"))
        event_id = body.event_id or idempotency_key
        if not event_id:
            raise Problem(422, "invalid_body", "event_id: required (in the body or as the Idempotency-Key header)")
        try:
            parse_update({"type": body.type, "event_id": event_id, "data": body.data})
        except EventRejected as err:
            raise Problem(422, "invalid_event", str(err)) from None
        try:
            ack = await dsmo().deliver_event(run_id, body.type, body.data, event_id=event_id)
        except RunNotFound as err:
            raise Problem(404, "run_not_found", str(err)) from None
        except (EventNotAccepted, RunClosed) as err:
            raise Problem(409, "not_accepted", str(err)) from None
        return ack.model_dump(mode="json")

    @app.get("/executions/{run_id}", summary="A run's status (the seed's WAITING structure)")
    async def status(run_id: str, _: ApiKey = Depends(caller("read"))) -> dict[str, Any]:
        try:
            view = await dsmo().status(run_id)
        except RunNotFound as err:
            raise Problem(404, "run_not_found", str(err)) from None
        return view.model_dump(mode="json")

    @app.get("/executions", summary="List runs by status, waitingFor and agent")
    async def list_runs(
        status: str | None = Query(
            default=None, pattern="^(pending|running|waiting|completed|failed|timeout|cancelled)$"
        ),
        waiting_for: str | None = Query(default=None, alias="waitingFor", pattern="^[a-z]+$"),
        agent: str | None = Query(default=None, pattern="^[a-z0-9-]+$"),
        limit: int = Query(default=100, ge=1, le=1000),
        _: ApiKey = Depends(caller("read")),
    ) -> dict[str, Any]:
        clauses = ["WorkflowType='AgentExecution'"]
        if status:
            clauses.append(f"AgentExecutionStatus='{status}'")
            if status in ("pending", "running", "waiting"):
                clauses.append("ExecutionStatus='Running'")  # a terminated run keeps its last status
        if waiting_for:
            clauses.append(f"WaitingFor='{waiting_for}'")
        if agent:
            clauses.append(f"AgentName='{agent}'")
        runs = []
        async for execution in dsmo().temporal.list_workflows(" AND ".join(clauses), limit=limit):
            attrs = execution.typed_search_attributes
            until: datetime | None = attrs.get(sa.WAITING_UNTIL)
            runs.append(
                {
                    "runId": execution.id,
                    "agent": attrs.get(sa.AGENT_NAME),
                    "status": attrs.get(sa.AGENT_EXECUTION_STATUS),
                    "waitingFor": attrs.get(sa.WAITING_FOR),
                    "waitingUntil": until.isoformat() if until else None,
                    "startedAt": execution.start_time.isoformat(),
                }
            )
        return {"runs": runs}

    @app.post("/executions/{run_id}/cancel", status_code=202, summary="Cancel a run that has not ended")
    async def cancel(run_id: str, body: CancelRequest, key: ApiKey = Depends(caller("cancel"))) -> dict[str, Any]:
        try:
            await dsmo().cancel(run_id, reason=body.reason, by=key.name)
        except RunNotFound as err:
            raise Problem(404, "run_not_found", str(err)) from None
        except RunClosed as err:
            raise Problem(409, "run_closed", str(err)) from None
        except InvalidRunId:
            raise
        except DsmoError as err:
            raise Problem(409, err.code, str(err)) from None
        return {"runId": run_id, "cancelRequested": True}

    return app


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
