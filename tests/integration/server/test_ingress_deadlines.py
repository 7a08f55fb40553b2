"""A slow sender holds an ingress connection only as long as its deadlines: the head, then the body.

Each connection here is a real socket to a real uvicorn serving the ingress; the deadlines are
set short (1 s for a head, 2 s for a body) so the suite does not wait long, and the socket's own
timeout is only a hang guard.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from dsmo.server.api_keys import KeyStore
from tests.conftest import Harness
from tests.ingress_server import serving

pytestmark = pytest.mark.integration


@pytest.fixture
def ingress(harness: Harness, tmp_path: Path) -> Iterator[tuple[str, str]]:
    settings = harness.settings.with_changes(
        ingress={"api_keys_file": str(tmp_path / "keys.json"), "head_timeout": 1.0, "body_timeout": 2.0}
    )
    key = KeyStore(settings.api_keys_path).add("crm", ["start", "read", "events:MESSAGE_RECEIVED"])
    with serving(settings) as url:
        yield url, key


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname, parts.port), timeout=30)  # a hang guard


def _answer_and_close(conn: socket.socket) -> tuple[str, dict[str, object]]:
    """Everything the server sends until it closes the connection: its status line and JSON body.
    The answer says it closes the connection (so the server does so once it is sent)."""
    received = b""
    while chunk := conn.recv(65536):
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert "connection: close" in [line.lower() for line in lines[1:]], head
    return lines[0], json.loads(body)


def test_connections_that_send_nothing_or_half_a_head_are_answered_408_and_closed(ingress: tuple[str, str]) -> None:
    url, key = ingress
    silent = [_connect(url) for _ in range(20)]
    halves = [_connect(url) for _ in range(20)]
    for conn in halves:
        conn.sendall(b"POST /executions HTTP/1.1\r\nHost: x\r\nContent-Le")
    # Meanwhile the ingress answers everyone else.
    assert httpx.get(f"{url}/executions", headers={"Authorization": f"Bearer {key}"}, timeout=30).status_code == 200
    for conn in silent + halves:
        with conn:
            status, body = _answer_and_close(conn)
        assert status == "HTTP/1.1 408 Request Timeout", status
        assert body == {"error": {"code": "request_timeout", "message": "the request's head did not arrive within 1 s"}}


def test_a_kept_alive_connection_whose_next_head_is_late_is_closed(ingress: tuple[str, str]) -> None:
    url, key = ingress
    with _connect(url) as conn:
        conn.sendall(f"GET /executions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n".encode())
        first = b""
        while b"\r\n\r\n" not in first:
            first += conn.recv(65536)
        assert first.startswith(b"HTTP/1.1 200"), first[:100]
        conn.sendall(b"GET /executions HTTP/1.1\r\nHo")
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    assert b"HTTP/1.1 408 Request Timeout" in received, received[-300:]


def test_a_body_that_arrives_too_slowly_is_answered_408_and_nothing_is_started(ingress: tuple[str, str]) -> None:
    url, key = ingress
    body = json.dumps({"agent": "candidate-screening", "input": {}, "runId": "slow-body-run"}).encode()
    with _connect(url) as conn:
        head = (
            f"POST /executions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        conn.sendall(head.encode() + body[:10])  # and the rest never comes
        status, answer = _answer_and_close(conn)
    assert status == "HTTP/1.1 408 Request Timeout", status
    assert answer == {"error": {"code": "request_timeout", "message": "the body did not arrive within 2 s"}}
    seen = httpx.get(f"{url}/executions/slow-body-run", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert seen.status_code == 404, seen.text
