"""The ingress answers only what it did: a start names its own run or the conflict, and it refuses
bodies it will not take (unsigned sealed uploads, JSON it cannot hold) before reading or parsing them.
"""

from __future__ import annotations

import json
import socket
import uuid
from urllib.parse import urlsplit

import httpx
import pytest

from tests.integration.server.test_ingress import CANDIDATE, Ingress, call, ingress

pytestmark = pytest.mark.integration
__all__ = ["ingress"]  # the fixture, shared with test_ingress.py


async def test_an_existing_run_id_is_a_conflict_whoever_names_it(ingress: Ingress) -> None:
    crm = ingress.client()
    run_id = f"cand-{uuid.uuid4().hex[:10]}"
    body = {"agent": "candidate-screening", "input": CANDIDATE, "runId": run_id}
    first = await call("POST", crm, "/executions", json=body)
    assert first.status_code == 201, first.text
    assert first.json()["duplicate"] is False

    other = {**body, "input": {"candidate": {"name": "Someone else", "phone": "+1"}}}
    for again in (body, other):
        refused = await call("POST", crm, "/executions", json=again)
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "run_exists"
        assert refused.json()["error"]["message"].startswith("runId: "), refused.text
    # An Idempotency-Key names the run itself: it is not given beside a runId.
    both = await call("POST", crm, "/executions", json=body, headers={"Idempotency-Key": "k-2"})
    assert both.status_code == 422 and both.json()["error"]["message"].startswith("runId: "), both.text


async def test_an_idempotency_key_reused_with_another_body_is_a_conflict(ingress: Ingress) -> None:
    crm = ingress.client()
    lead = f"lead-{uuid.uuid4().hex[:8]}"
    body = {"agent": "candidate-screening", "input": CANDIDATE}
    first = await call("POST", crm, "/executions", json=body, headers={"Idempotency-Key": lead})
    assert first.status_code == 201, first.text
    again = await call("POST", crm, "/executions", json=body, headers={"Idempotency-Key": lead})
    assert again.status_code == 200 and again.json()["runId"] == first.json()["runId"]
    changed = {**body, "input": {"candidate": {"name": "Otra", "phone": "+34 600"}}}
    refused = await call("POST", crm, "/executions", json=changed, headers={"Idempotency-Key": lead})
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["message"].startswith("Idempotency-Key: "), refused.text


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"agent": "candidate-screening", "input": {"score": NaN}}', "input.score: NaN"),
        ('{"agent": "candidate-screening", "input": {"scores": [1, 1e400]}}', "input.scores[1]: 1e400"),
        ('{"agent": "candidate-screening", "input": {"n": ' + "7" * 5000 + "}}", "input.n: an integer"),
        ('{"agent": "candidate-screening", "input": ' + "[" * 30000 + "]" * 30000 + "}", "input[0][0]"),
        # Text that is not JSON at all: the parser's reason, placed by line and column.
        (
            '{"agent": "candidate-screening",\n "input": {,}}',
            "body: not JSON: Expecting property name enclosed in double quotes at line 2, column 12",
        ),
        (
            '{"agent": "candidate-screening", "input": {"name": "Jos\xe9"}}'.encode("latin-1"),
            "body: not UTF-8 text at byte offset 55",
        ),
    ],
)
async def test_json_no_document_can_hold_is_refused_naming_where(
    ingress: Ingress, text: str | bytes, field: str
) -> None:
    answer = await call(
        "POST", ingress.client(), "/executions", content=text, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_json"
    assert answer.json()["error"]["message"].startswith(field), answer.text


@pytest.mark.parametrize("media", ["text/plain", "application/x-www-form-urlencoded", None, "text/" + "x" * 5000])
async def test_a_body_sent_as_another_type_than_json_is_refused_naming_it(ingress: Ingress, media: str | None) -> None:
    body = json.dumps({"agent": "no-such-agent", "input": {}})
    headers = {"content-type": media} if media else {}
    answer = await call("POST", ingress.client(), "/executions", content=body.encode(), headers=headers)
    assert answer.status_code == 415, answer.text
    assert answer.json()["error"] == {
        "code": "unsupported_media_type",
        # The type as sent, its first 80 characters: the answer stays a line, whatever was sent.
        "message": f"body: send JSON with Content-Type: application/json, not {(media or 'no Content-Type')[:80]}",
    }
    # JSON types with parameters or a +json suffix are JSON: the body is read, and its agent
    # looked up (none such).
    for header in ({"content-type": "application/json; charset=utf-8"}, {"content-type": "application/merge+json"}):
        answer = await call("POST", ingress.client(), "/executions", content=body, headers=header)
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "unknown_agent", (header, answer.text)


async def test_deep_event_data_is_refused_naming_the_field(ingress: Ingress) -> None:
    text = json.dumps({"type": "MESSAGE_RECEIVED", "data": {"text": 0}}).replace("0", "[" * 8000 + "]" * 8000)
    answer = await call(
        "POST", ingress.client(), "/executions/x-1/events", content=text, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["message"].startswith("data.text[0]"), answer.text


async def test_a_console_path_with_a_line_break_gets_the_console_answer(ingress: Ingress) -> None:
    with httpx.Client(base_url=ingress.url, timeout=30) as browser:
        answer = await call("GET", browser, "/console/runs/%0d%0a")
    # The console's own answer (sign in first), not the API's 401 JSON; no line break reaches a header.
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"].startswith("/console/login"), answer.headers


def test_an_unsigned_sealed_upload_is_refused_before_its_body_is_read(ingress: Ingress) -> None:
    # 20 MB declared, 1 KB sent: a server that reads the body first would wait for the rest.
    parts = urlsplit(ingress.url)
    head = (
        "POST /console/runs/r-1/upload/cv/e-1/sig HTTP/1.1\r\n"
        f"Host: {parts.netloc}\r\n"
        "Content-Type: multipart/form-data; boundary=b\r\n"
        f"Content-Length: {20 * 2**20}\r\n\r\n"
    )
    with socket.create_connection((parts.hostname, parts.port), timeout=20) as conn:
        conn.sendall(head.encode() + b"x" * 1024)
        answer = _read_answer(conn)  # a hang guard: the socket times out at 20 s
    assert answer.startswith("HTTP/1.1 401"), answer[:200]
    assert "text/html" in answer and "sign in" in answer


def _read_answer(conn: socket.socket) -> str:
    """The whole answer: the head, then as many body bytes as it declares (one recv may hold only the head)."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = conn.recv(65536)
        if not chunk:
            return received.decode("latin-1")
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
        None,
    )
    while length is not None and len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return (head + b"\r\n\r\n" + body).decode("latin-1")
