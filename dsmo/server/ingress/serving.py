"""How the ingress is served: uvicorn, with a deadline on each request's head.

Uvicorn closes a kept-alive connection that stays idle, but once a byte arrives it waits for the
rest of the head for as long as the sender likes, and a connection that sends nothing at all is
held too: a few hundred slow senders hold as many connections for good. The head deadline is
armed when a connection opens and when the first byte of a new request arrives; the parsed head
disarms it. The body has its own deadline, in the guard (`IngressGuard`), which sees the body.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from dsmo.config.settings import Settings


class HeadDeadlineProtocol(H11Protocol):
    """Uvicorn's HTTP/1.1 protocol, closing a connection whose request head is late (408)."""

    head_seconds: float = 10.0
    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Arm the deadline: a connection that sends nothing is as slow as one that sends little."""
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Arm the deadline at a new request's first byte; disarm it once its head is parsed."""
        if self._between_requests() and self._head_deadline is None:
            self._arm()
        super().data_received(data)
        if not self._between_requests():
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Nothing to time out any more."""
        self._disarm()
        super().connection_lost(exc)

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        self._disarm()
        self._head_deadline = self.loop.call_later(self.head_seconds, self._head_too_late)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_late(self) -> None:
        self._head_deadline = None
        if self.transport.is_closing() or not self._between_requests():
            return
        # Written by hand: h11 sends no response before it has parsed a request.
        message = f"the request's head did not arrive within {self.head_seconds:g} s"
        body = json.dumps({"error": {"code": "request_timeout", "message": message}}).encode()
        head = (
            "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        self.transport.close()


def server_config(app: Any, settings: Settings, host: str, port: int, **options: Any) -> uvicorn.Config:
    """The uvicorn configuration the ingress is served with, by `dsmo serve` and by tests alike.

    Args:
        app: The ASGI application (`create_app`'s).
        settings: Where the head deadline comes from (``settings.ingress.head_timeout``).
        host: The address to listen on.
        port: The port to listen on.
        **options: Further uvicorn options (``log_level``, ...).

    Returns:
        The configuration, with the head deadline's protocol as its HTTP implementation.
    """
    protocol = type("IngressProtocol", (HeadDeadlineProtocol,), {"head_seconds": settings.ingress.head_timeout})
    return uvicorn.Config(app, host=host, port=port, http=protocol, **options)
