"""The ingress's outer guard, in front of routing and body parsing.

A request without a valid API key is refused before its body is read; a key in the URL is
refused (and never reaches the access log); a body is read only up to its cap (declared or
chunked), so nobody can make the server buffer a gigabyte to be told no; the one larger cap, a
document sealed through the console, is only for a signed-in session, checked before the body is
read; each key delivers events at a bounded rate.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, quote

from starlette.requests import Request

from dsmo.server.api_keys import ApiKey, KeyStore, bearer_credential
from dsmo.server.console.auth import current_viewer
from dsmo.server.console.web import is_console_path, problem_document, security_headers
from dsmo.server.token_buckets import TokenBuckets

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# The API's own description: public, behind the `read` scope, or not served (DSMO_INGRESS_DOCS).
DOC_PATHS = frozenset({"/docs", "/openapi.json"})
DOC_ASSETS = "/docs/assets/"
# Query parameters that would carry a credential, by name once lowercased and stripped of
# punctuation (`API_KEY`, `api-key` and `apiKey` are all `apikey`): refused, and redacted from the
# access log, whatever their value.
CREDENTIAL_PARAMS = frozenset(
    {
        "apikey",
        "key",
        "token",
        "accesstoken",
        "apitoken",
        "authtoken",
        "xapikey",
        "auth",
        "authorization",
        "bearer",
    }
)
# What a DSMO key looks like (`dsmo_` and 43 URL-safe characters), wherever it is in a query: a
# parameter of any name carrying one (`?q=Bearer dsmo_...`), or the bare key (`?dsmo_...`). Its
# exact shape, so that an uploaded file named `dsmo_report_...` is not one.
KEY_LIKE = re.compile(r"(?<![A-Za-z0-9_-])dsmo_[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])")
REDACTED = "[redacted]"
EVENTS_PATH = re.compile(r"/executions/[^/]+/events")
# The console signs people in itself (a session cookie, CSRF tokens): no API key header there.
# DOTALL: a console path with an encoded line break is still the console's (its page answers).
CONSOLE_PATH = re.compile(r"/|/console(/.*)?", re.DOTALL)
UPLOAD_RETURN = re.compile(r"/console/runs/[^/]+/uploaded/[^/]+/[^/]+/[^/]+")
# A document posted to the console to be sealed (a run with a data subject): the one large body.
SEALED_UPLOAD = re.compile(r"/console/runs/[^/]+/upload/[^/]+/[^/]+/[^/]+")


class BodyRefused(Exception):
    """Raised from the guard's receive when the body is refused (too large, too slow); it is answered."""


class IngressGuard:
    """ASGI middleware: no credential in URLs, authentication, event rate, then a streaming body cap and deadline.

    Args:
        app: The application behind the guard.
        keys: Where API keys are verified.
        max_body: The largest body read, in bytes.
        upload_max_body: The largest body of a sealed document upload (default: ``max_body``).
        body_timeout: Seconds a request's whole body may take to arrive (408 after).
        docs: ``public``, ``read`` or ``off``: who may read the API description.
        event_rate: Per-key token buckets for event deliveries.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        keys: KeyStore,
        max_body: int,
        upload_max_body: int | None = None,
        docs: str = "read",
        event_rate: TokenBuckets,
        body_timeout: float = 60.0,
    ) -> None:
        self.app, self.keys, self.max_body, self.docs, self.event_rate = app, keys, max_body, docs, event_rate
        self.body_timeout = body_timeout
        self.upload_max_body = upload_max_body or max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        path: str = scope["path"]
        # The object store names the uploaded object `key` when it sends the browser back.
        exempt = frozenset({"key"}) if UPLOAD_RETURN.fullmatch(path) else frozenset()
        in_url = credential_params(scope.get("query_string", b"").decode("latin-1"), exempt=exempt)
        if in_url and is_console_path(path):
            message = f"{in_url[0]}: a credential in the address is refused (it would be logged); sign in with the form"
            await _page(send, 400, message)
            return
        if in_url:
            message = f"{in_url[0]}: send API keys in a header (Authorization: Bearer or X-API-Key), never in the URL"
            await _reply(send, 400, "credential_in_url", message)
            return
        public = CONSOLE_PATH.fullmatch(path) is not None or (
            self.docs == "public" and (path in DOC_PATHS or path.startswith(DOC_ASSETS))
        )
        if not public:
            key = await self._authenticate(headers, send)
            if key is None:
                return
            if (path in DOC_PATHS or path.startswith(DOC_ASSETS)) and not key.allows("read"):
                await _reply(send, 403, "forbidden", f"key {key.name!r} lacks the scope 'read'")
                return
            if scope["method"] == "POST" and EVENTS_PATH.fullmatch(path):
                wait = self.event_rate.take(key.name)
                if wait > 0:
                    retry_after = str(max(1, math.ceil(wait)))
                    message = f"key {key.name!r} sends events faster than its limit; retry in {retry_after} s"
                    await _reply(send, 429, "rate_limited", message, [(b"retry-after", retry_after.encode())])
                    return
        limit = self.max_body
        if scope["method"] == "POST" and SEALED_UPLOAD.fullmatch(path):
            # The large cap is for a signed-in session only: nobody else gets 25 MB read and parsed.
            if current_viewer(Request(scope)) is None:
                await _page(send, 401, "sign in to the console first; the document was not read")
                return
            limit = self.upload_max_body
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await _refuse(scope, send, 413, "too_large", f"body is {declared} bytes; the limit is {limit}")
            return
        await self._capped(scope, receive, send, limit)

    async def _authenticate(self, headers: dict[str, str], send: Send) -> ApiKey | None:
        presented = headers.get("x-api-key") or bearer_credential(headers.get("authorization"))
        if not presented:
            await _reply(send, 401, "unauthenticated", "send an API key: Authorization: Bearer <key> or X-API-Key")
            return None
        key = self.keys.verify(presented)
        if key is None:
            await _reply(send, 401, "unauthenticated", "unknown API key")
        return key

    async def _capped(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        received = 0
        body_done = replied = False
        refusal: tuple[int, str, str] | None = None
        deadline: float | None = None

        async def capped_receive() -> Message:
            nonlocal received, refusal, body_done, deadline
            if body_done:  # after the body, a receive waits for the disconnect: no deadline
                return await receive()
            loop = asyncio.get_running_loop()
            deadline = deadline or loop.time() + self.body_timeout
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                refusal = (408, "request_timeout", f"the body did not arrive within {self.body_timeout:g} s")
                raise BodyRefused from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refusal = (413, "too_large", f"body is over the {limit}-byte limit")
                    raise BodyRefused
            body_done = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def answer_refusal() -> None:
            nonlocal replied
            if refusal is not None and not replied:
                replied = True
                # A sender too slow for the deadline is not sending: the connection can close at
                # once. One still sending (413) is not cut off: it would lose the answer to a reset.
                await _refuse(scope, send, *refusal, close=refusal[0] == 408)

        async def capped_send(message: Message) -> None:
            # The app turns a failed body read into its own error: send the refusal in its place.
            if refusal is None:
                await send(message)
            else:
                await answer_refusal()

        try:
            await self.app(scope, capped_receive, capped_send)
        except BodyRefused:
            await answer_refusal()


def credential_params(query: str, *, exempt: frozenset[str] = frozenset()) -> list[str]:
    """The names of query parameters in ``query`` that carry a credential, or would.

    Args:
        query: The query string, undecoded.
        exempt: Names another party gives a meaning (compared as they are); a DSMO key as such a
            parameter's value is still one.

    Returns:
        Each one's name as it can be shown: a name that is itself a key is shown as ``[redacted]``.
    """
    return [
        REDACTED if KEY_LIKE.search(name) else name
        for name, value in parse_qsl(query, keep_blank_values=True)
        if _is_credential(name, value, exempt)
    ]


def _is_credential(name: str, value: str, exempt: frozenset[str] = frozenset()) -> bool:
    # The name is compared without case or punctuation; the value, because a key is recognisable
    # whatever the parameter is called.
    named = name not in exempt and re.sub(r"[^a-z0-9]", "", name.lower()) in CREDENTIAL_PARAMS
    return named or KEY_LIKE.search(name) is not None or KEY_LIKE.search(value) is not None


def redact_credentials(path_with_query: str) -> str:
    """``path_with_query`` with the value of every credential-like query parameter replaced (and the
    name, if it is a key itself)."""
    path, separator, query = path_with_query.partition("?")
    if not separator or not credential_params(query):
        return path_with_query
    kept = []
    for name, value in parse_qsl(query, keep_blank_values=True):
        if _is_credential(name, value):
            shown_name = REDACTED if KEY_LIKE.search(name) else quote(name)
            kept.append(f"{shown_name}={REDACTED}")
        else:
            kept.append(f"{quote(name)}={quote(value)}")
    return f"{path}?{'&'.join(kept)}"


class RedactedAccessLog(logging.Filter):
    """Uvicorn's access log with credential-like query values redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        # uvicorn.access records carry (client, method, path with query, HTTP version, status).
        if isinstance(record.args, tuple) and len(record.args) == 5 and isinstance(record.args[2], str):
            record.args = (*record.args[:2], redact_credentials(record.args[2]), *record.args[3:])
        return True


def protect_access_log() -> None:
    """Install the redaction on uvicorn's access logger, once per process."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(existing, RedactedAccessLog) for existing in access.filters):
        access.addFilter(RedactedAccessLog())


async def _reply(
    send: Send, status: int, code: str, message: str, extra_headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra_headers or [])})
    await send({"type": "http.response.body", "body": body})


async def _refuse(scope: Scope, send: Send, status: int, code: str, message: str, *, close: bool = False) -> None:
    """A refusal in the shape of the path: the console's page, or the API's JSON.

    With ``close``, the answer says ``connection: close`` and the server closes the connection
    once it is sent, rather than keep it open for the rest of a body nobody will read.
    """
    extra = [(b"connection", b"close")] if close else []
    if is_console_path(scope["path"]):
        await _page(send, status, message, extra)
    else:
        await _reply(send, status, code, message, extra)


async def _page(send: Send, status: int, message: str, extra_headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """The console's error page, for a console path refused before it reaches the app."""
    body = problem_document(status, message).encode()
    headers = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    headers += [(name.encode(), value.encode()) for name, value in security_headers().items()]
    headers += extra_headers or []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
