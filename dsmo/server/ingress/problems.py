"""Every error the ingress answers, in its documented shape, whatever raised it.

API paths answer JSON, `{"error": {"code": ..., "message": ...}}`; console paths (`/console/...`)
answer an HTML page naming the problem. Routing's own answers, invalid parameters and bodies,
DSMO's errors and any unexpected exception all go through here, so nothing reaches a client as
Starlette's plain-text "Internal Server Error".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from dsmo.server.console.web import is_console_path, problem_page
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import InvalidRunId

log = logging.getLogger("dsmo.ingress")

# The methods a 405's Allow may name (the API's routes take no others).
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")

# DSMO's errors by code: the status each answers with (any other DsmoError is a 500).
DSMO_ERROR_STATUS = {
    "run_not_found": 404,
    "unknown_agent": 404,
    "run_exists": 409,
    "key_busy": 409,
    "run_closed": 409,
    "event_rejected": 409,
    "run_not_started": 409,
    "workflow_task_failing": 409,
    "invalid_input": 422,
    "invalid_definition": 422,
    "no_worker": 503,
    "flow_control_busy": 503,
    "temporal_unavailable": 503,
}


class ErrorDetail(BaseModel):
    code: str = Field(description="A stable, machine-readable code, for example `run_not_found`.")
    message: str = Field(description="One line for a person: the field or run concerned, and the reason.")


class ErrorBody(BaseModel):
    """Every error the API answers: `{"error": {"code": ..., "message": ...}}`."""

    error: ErrorDetail


ERROR_MEANINGS = {
    400: "A body that is not JSON, or JSON no value can hold, or an API key in the URL.",
    401: "No API key, or an unknown one.",
    403: "The key lacks the scope the route needs.",
    404: "No such run, agent, subscription or delivery.",
    408: "The body did not arrive in time.",
    409: "The run's state refuses it: the run exists or has ended, its key is busy, or it took no such event.",
    413: "The body is larger than the ingress takes.",
    415: "A body sent without a JSON `Content-Type` (`application/json`, or an `application/...+json` type).",
    422: "A malformed body, parameter or value; the message names the field and the reason.",
    429: "Too many requests or events for the key; `Retry-After` says when to try again.",
    503: "Temporal or the store cannot be reached, or no worker serves the run's task queue.",
}


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The API description's responses for these error statuses, each in the error shape."""
    return {status: {"model": ErrorBody, "description": ERROR_MEANINGS[status]} for status in statuses}


# What any API route may answer besides its success (a route adds the others it can).
COMMON_ERRORS = documented(400, 401, 403, 422, 429, 503)
# And what a route that reads a body may answer besides.
BODY_ERRORS = documented(408, 413, 415)


class Problem(Exception):
    """An answer other than success, raised by a route or a dependency.

    Args:
        status: The HTTP status code.
        code: A stable, machine-readable error code (for example ``run_not_found``).
        message: One line for a person.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_response(status: int, code: str, message: str) -> JSONResponse:
    """The documented error body with ``status``."""
    return JSONResponse(status_code=status, content={"error": {"code": code, "message": message}})


def answer(
    request: Request, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    """The error in the shape of the path asked for: a console page, or the API's JSON."""
    response: Response
    if is_console_path(request.url.path):
        response = problem_page(request, status, message)
    else:
        response = error_response(status, code, message)
    response.headers.update(headers or {})
    return response


def not_json(text: Any, error: dict[str, Any]) -> str:
    """The message for a body the JSON parser refused: its reason, and where by line and column.

    The parser places it by character offset; a person finds a line and column in their editor.
    """
    reason = str(error.get("ctx", {}).get("error", "invalid"))
    loc = error.get("loc", ())
    offset = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else None
    if not isinstance(text, str) or offset is None:
        return f"body: not JSON: {reason}"
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"body: not JSON: {reason} at line {line}, column {column}"


def methods_for(request: Request) -> str:
    """Every method some route takes on the request's path (``GET, POST``), for a 405's ``Allow``.

    Starlette's own ``Allow`` names only the first route whose path matches, and FastAPI makes a
    route per method: ``DELETE /executions`` was told ``POST`` alone. So each method is tried
    against the routes as the router would.
    """
    allowed = []
    for method in HTTP_METHODS:
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] is Match.FULL for route in request.app.router.routes):
            allowed.append(method)
    return ", ".join(allowed)


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error in its documented shape (see the module's docstring)."""

    @app.exception_handler(Problem)
    async def problem(request: Request, err: Problem) -> Response:
        return answer(request, err.status, err.code, err.message)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, err: StarletteHTTPException) -> Response:
        # Routing's own answers (unknown path, wrong method) in the documented shape, not {"detail": ...}.
        codes = {404: "not_found", 405: "method_not_allowed"}
        message, path, headers = str(err.detail), request.url.path, dict(err.headers or {})
        if err.status_code == 404 and is_console_path(path):
            message = f"no console page at {path}"
        elif err.status_code == 404 and message == "Not Found":  # routing's: the path matches no route
            message = f"no such path: {path}"
        elif err.status_code == 405:  # the path exists; say which methods it takes (also in Allow)
            allowed = methods_for(request)
            headers["Allow"] = allowed
            message = f"{request.method} is not allowed on {path}" + (f"; it takes {allowed}" if allowed else "")
        return answer(request, err.status_code, codes.get(err.status_code, "http_error"), message, headers)

    @app.exception_handler(InvalidRunId)
    async def bad_run_id(request: Request, err: InvalidRunId) -> Response:
        return answer(request, 422, err.code, str(err))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, err: RequestValidationError) -> Response:
        first = err.errors()[0]
        if first.get("type") == "json_invalid":
            return answer(request, 400, "invalid_json", not_json(err.body, first))
        where = ("body", "query", "path") if is_console_path(request.url.path) else ("body",)
        field = ".".join(str(part) for part in first.get("loc", ()) if part not in where) or "body"
        return answer(request, 422, "invalid_body", f"{field}: {first.get('msg', 'invalid')}")

    @app.exception_handler(DsmoError)
    async def dsmo_error(request: Request, err: DsmoError) -> Response:
        status = DSMO_ERROR_STATUS.get(err.code, 500)
        if status == 500:
            log.error("%s %s: %s: %s", request.method, request.url.path, type(err).__name__, err)
        return answer(request, status, err.code, str(err))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, err: Exception) -> Response:
        # Starlette logs the traceback after this answer is sent (it re-raises to the server).
        message = f"the server failed to answer ({type(err).__name__}); the error is in its log"
        return answer(request, 500, "internal_error", message)
