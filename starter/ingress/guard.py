"""The ingress's outer guard, in front of routing and body parsing: a request without a valid
API key is refused before its body is read, and a body is read only up to its cap (declared or
chunked), so nobody can make the server buffer a gigabyte to be told no."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starter.ingress.keys import KeyStore

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Served without a key: the API's own description.
PUBLIC_PATHS = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


class BodyTooLarge(Exception):
    """Raised from inside ``receive`` once the body passes the cap: reading stops there."""


class IngressGuard:
    """ASGI middleware: authentication first, then a streaming body cap."""

    def __init__(self, app: ASGIApp, *, keys: KeyStore, max_body: int) -> None:
        self.app, self.keys, self.max_body = app, keys, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        if scope["path"] not in PUBLIC_PATHS:
            presented = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not presented:
                await _reply(send, 401, "unauthenticated", "send an API key: Authorization: Bearer <key> or X-API-Key")
                return
            if self.keys.verify(presented) is None:
                await _reply(send, 401, "unauthenticated", "unknown API key")
                return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            await _reply(send, 413, "too_large", f"body is {declared} bytes; the limit is {self.max_body}")
            return
        received = 0
        exceeded = replied = False

        async def capped_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    exceeded = True
                    raise BodyTooLarge
            return message

        async def capped_send(message: Message) -> None:
            # The app turns a failed body read into its own error: answer 413 in its place.
            nonlocal replied
            if not exceeded:
                await send(message)
            elif not replied:
                replied = True
                await _reply(send, 413, "too_large", f"body is over the {self.max_body}-byte limit")

        try:
            await self.app(scope, capped_receive, capped_send)
        except BodyTooLarge:
            if not replied:
                replied = True
                await _reply(send, 413, "too_large", f"body is over the {self.max_body}-byte limit")


async def _reply(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
