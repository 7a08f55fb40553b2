"""Every error the ingress answers, in one JSON shape: `{"error": {"code": ..., "message": ...}}`."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from dsmo.workflows.identifiers import InvalidRunId


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


def install_error_handlers(app: FastAPI) -> None:
    """Answer problems, routing errors, bad run ids and invalid bodies in the documented shape."""

    @app.exception_handler(Problem)
    async def problem(_: Request, err: Problem) -> JSONResponse:
        return error_response(err.status, err.code, err.message)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, err: StarletteHTTPException) -> JSONResponse:
        # Routing's own answers (unknown path, wrong method) in the documented shape, not {"detail": ...}.
        codes = {404: "not_found", 405: "method_not_allowed"}
        return error_response(err.status_code, codes.get(err.status_code, "http_error"), str(err.detail))

    @app.exception_handler(InvalidRunId)
    async def bad_run_id(_: Request, err: InvalidRunId) -> JSONResponse:
        return error_response(422, err.code, str(err))

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        first = err.errors()[0]
        field = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or "body"
        return error_response(422, "invalid_body", f"{field}: {first.get('msg', 'invalid')}")
