"""The HTTP ingress over real HTTP on loopback: a whole candidate-screening flow, keys, scopes, limits."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsmo.activities.definition_store import DefinitionStore
from dsmo.server.api_keys import KeyStore
from dsmo.server.ingress.app import create_app
from tests import polling
from tests.conftest import Harness, definition_from
from tests.ingress_server import serving

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]
CANDIDATE = {"candidate": {"name": "Marta", "phone": "+34 611"}}


@dataclass
class Ingress:
    url: str
    keys: dict[str, str]

    def client(self, key: str | None = "crm") -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.keys[key]}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture
def ingress(harness: Harness, tmp_path: Path) -> Iterator[Ingress]:
    DefinitionStore(harness.store).publish(definition_from(REPO / "examples" / "candidate_screening.yaml"))
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    store = KeyStore(settings.api_keys_path)
    keys = {
        "crm": store.add("crm", ["start", "read", "cancel", "events:MESSAGE_RECEIVED"]),
        "docs": store.add("docs-portal", ["events:DOCUMENT_UPLOADED"]),
        "starter": store.add("starter", ["start", "read"]),
    }
    with serving(settings) as url:
        yield Ingress(url, keys)


async def call(method: str, client: httpx.Client, path: str, **kwargs: Any) -> httpx.Response:
    return await asyncio.to_thread(client.request, method, path, **kwargs)


async def until(client: httpx.Client, run_id: str, status: str) -> dict[str, Any]:
    """The run's view once it has reached ``status``."""

    async def view() -> dict[str, Any]:
        return (await call("GET", client, f"/executions/{run_id}")).json()  # type: ignore[no-any-return]

    return await polling.until_value(
        view, lambda body: body.get("status") == status, f"{run_id} reaches {status}", seconds=120
    )


async def test_a_whole_flow_over_http(ingress: Ingress) -> None:
    crm = ingress.client()
    lead = f"crm-lead-{uuid.uuid4().hex[:8]}"  # an id of the calling system, unique to this test run
    started = await call(
        "POST",
        crm,
        "/executions",
        json={"agent": "candidate-screening", "input": CANDIDATE},
        headers={"Idempotency-Key": lead},
    )
    assert started.status_code == 201, started.text
    run_id = started.json()["runId"]
    again = await call(
        "POST",
        crm,
        "/executions",
        json={"agent": "candidate-screening", "input": CANDIDATE},
        headers={"Idempotency-Key": lead},
    )
    assert again.status_code == 200 and again.json()["runId"] == run_id  # a retried start gets the same run

    waiting = await until(crm, run_id, "waiting")
    assert waiting["waitingFor"] == "response"
    waiting_runs = {"status": "waiting", "waitingFor": "response", "agent": "candidate-screening"}

    async def listed() -> bool:  # visibility is updated asynchronously
        page = await call("GET", crm, "/executions", params=waiting_runs)
        return run_id in [run["runId"] for run in page.json()["runs"]]

    await polling.until(listed, f"{run_id} listed as waiting")

    reply = {"type": "MESSAGE_RECEIVED", "data": {"text": "Sí, me interesa"}}
    delivered = await call(
        "POST", crm, f"/executions/{run_id}/events", json=reply, headers={"Idempotency-Key": "msg-1"}
    )
    assert delivered.status_code == 202 and delivered.json()["accepted"] is True
    repeated = await call("POST", crm, f"/executions/{run_id}/events", json=reply, headers={"Idempotency-Key": "msg-1"})
    assert repeated.status_code == 202 and repeated.json()["duplicate"] is True
    done = await until(crm, run_id, "completed")
    assert done["resultType"] == "success"
    late = await call("POST", crm, f"/executions/{run_id}/events", json=reply, headers={"Idempotency-Key": "msg-2"})
    assert late.status_code == 409 and late.json()["error"]["code"] == "not_accepted"


async def test_keys_scopes_and_bad_bodies(ingress: Ingress, harness: Harness) -> None:
    crm, docs, anonymous = ingress.client(), ingress.client("docs"), ingress.client(None)
    run_id = (await call("POST", crm, "/executions", json={"agent": "candidate-screening", "input": CANDIDATE})).json()[
        "runId"
    ]
    await until(crm, run_id, "waiting")
    event = {"type": "MESSAGE_RECEIVED", "event_id": "e1", "data": {"text": "hola"}}

    no_key = await call("POST", anonymous, f"/executions/{run_id}/events", json=event)
    assert no_key.status_code == 401 and "API key" in no_key.json()["error"]["message"]
    wrong = await call("GET", anonymous, f"/executions/{run_id}", headers={"X-API-Key": "dsmo_not-a-key"})
    assert wrong.status_code == 401
    out_of_scope = await call("POST", docs, f"/executions/{run_id}/events", json=event)
    assert out_of_scope.status_code == 403 and "events:MESSAGE_RECEIVED" in out_of_scope.json()["error"]["message"]
    cannot_read = await call("GET", docs, f"/executions/{run_id}")
    assert cannot_read.status_code == 403

    malformed = await call(
        "POST", crm, f"/executions/{run_id}/events", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert malformed.status_code == 400, malformed.text
    assert malformed.json()["error"] == {
        "code": "invalid_json",
        "message": "body: not JSON: Expecting property name enclosed in double quotes at line 1, column 2",
    }
    bad_payload = await call(
        "POST",
        crm,
        f"/executions/{run_id}/events",
        json={"type": "MESSAGE_RECEIVED", "event_id": "e2", "data": {"txt": "typo"}},
    )
    assert (
        bad_payload.status_code == 422
        and "MESSAGE_RECEIVED.text: is required" in bad_payload.json()["error"]["message"]
    )
    no_id = await call(
        "POST", crm, f"/executions/{run_id}/events", json={"type": "MESSAGE_RECEIVED", "data": {"text": "x"}}
    )
    assert no_id.status_code == 422 and "Idempotency-Key" in no_id.json()["error"]["message"]
    # An id in the body and another in the header: which one a retry comes under is unknown.
    both = {"type": "MESSAGE_RECEIVED", "event_id": "e3", "data": {"text": "x"}}
    conflict = await call("POST", crm, f"/executions/{run_id}/events", json=both, headers={"Idempotency-Key": "e4"})
    assert conflict.status_code == 422, conflict.text
    assert conflict.json()["error"] == {
        "code": "invalid_body",
        "message": "event_id: 'e3' differs from the Idempotency-Key header 'e4'; send one, or both alike",
    }
    assert not any(event.data.get("eventId") in ("e3", "e4") for event in await harness.dsmo.events(run_id))
    huge = await call(
        "POST",
        crm,
        f"/executions/{run_id}/events",
        json={"type": "MESSAGE_RECEIVED", "event_id": "e3", "data": {"text": "x" * 70_000}},
    )
    assert huge.status_code == 413
    unknown_run = await call("GET", crm, "/executions/no-such-run")
    assert unknown_run.status_code == 404
    unknown_agent = await call("POST", crm, "/executions", json={"agent": "nobody-here", "input": {}})
    assert unknown_agent.status_code == 404
    extra = await call("POST", crm, "/executions", json={"agent": "candidate-screening", "colour": "red"})
    assert extra.status_code == 422 and "colour" in extra.json()["error"]["message"]

    # Nothing above touched the run: it still waits, and a good event still resumes it.
    assert (await call("GET", crm, f"/executions/{run_id}")).json()["status"] == "waiting"
    cancelled = await call("POST", crm, f"/executions/{run_id}/cancel", json={"reason": "lead lost"})
    assert cancelled.status_code == 202
    final = await until(crm, run_id, "cancelled")
    assert final["cancelledBy"] == "crm" and final["cancelReason"] == "lead lost"


async def test_a_start_carries_its_first_events_and_the_status_shows_the_inbox(
    ingress: Ingress, harness: Harness
) -> None:
    from tests.integration.runs.test_inbox import chat

    DefinitionStore(harness.store).publish(chat())
    crm, starter = ingress.client(), ingress.client("starter")
    reply = {"type": "MESSAGE_RECEIVED", "data": {"text": "sí"}}
    forbidden = await call("POST", starter, "/executions", json={"agent": "inbox-chat", "events": [reply]})
    assert (
        forbidden.status_code == 403
        and "events.0: key 'starter' lacks the scope 'events:MESSAGE_RECEIVED'"
        in (forbidden.json()["error"]["message"])
    )
    # The crm key may start runs and send replies; the meeting comes from the calendar, later.
    lead = f"lead-{uuid.uuid4().hex[:8]}"
    started = await call(
        "POST", crm, "/executions", json={"agent": "inbox-chat", "events": [reply]}, headers={"Idempotency-Key": lead}
    )
    assert started.status_code == 201 and started.json()["eventsDelivered"] == 1, started.text
    run_id = started.json()["runId"]
    body = await until(crm, run_id, "waiting")
    while body["waitingFor"] != "document":
        body = (await call("GET", crm, f"/executions/{run_id}")).json()
    assert body["inbox"] is None  # the reply was taken at once
    await harness.dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "done"}, event_id="cal-1")
    body = (await call("GET", crm, f"/executions/{run_id}")).json()
    assert body["inbox"]["count"] == 1 and body["inbox"]["kinds"] == {"EVENT_COMPLETED": 1}
    assert body["inbox"]["oldestEventId"] == "cal-1"
    trail = await harness.dsmo.events(run_id)
    assert [e.data["eventId"] for e in trail if e.type == "EVENT_CONSUMED"] == [f"{lead}.0"]
    unknown = await call(
        "POST", crm, "/executions", json={"agent": "inbox-chat", "events": [{"type": "MESSAGE_RECEIVED", "data": {}}]}
    )
    assert unknown.status_code == 422 and "events.0: MESSAGE_RECEIVED.text: is required" in unknown.text


def test_the_committed_openapi_spec_is_current(tmp_path: Path) -> None:
    from dsmo.config.settings import Settings

    spec = create_app(Settings(state_dir=tmp_path)).openapi()
    committed = json.loads((REPO / "docs" / "openapi.json").read_text())
    assert committed == json.loads(json.dumps(spec)), "run `make openapi` and commit docs/openapi.json"


async def unfinished_chunked_post(url: str, path: str, headers: dict[str, str], chunks: int) -> tuple[int, Any]:
    """POST a chunked body of ``chunks`` 64 KiB chunks and never finish it; the answer, if any.

    A server that read the whole body before answering would never answer this request.
    """
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    writer.write(
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n"
        f"Content-Type: application/json\r\n{head}\r\n".encode()
    )
    for _ in range(chunks):
        writer.write(b"10000\r\n" + b"0" * 0x10000 + b"\r\n")
    await writer.drain()
    try:
        head_bytes = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 20)
        lines = head_bytes.decode("latin-1").split("\r\n")
        length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
        body = await asyncio.wait_for(reader.readexactly(length), 20)
    finally:
        writer.close()
    return int(lines[0].split(" ", 2)[1]), json.loads(body)


async def test_a_chunked_body_is_refused_before_it_is_read(ingress: Ingress) -> None:
    path = "/executions/r-1/events"
    status, body = await unfinished_chunked_post(ingress.url, path, {}, chunks=1)
    assert status == 401 and body["error"]["code"] == "unauthenticated"  # before the body is read
    key = {"Authorization": f"Bearer {ingress.keys['crm']}"}
    status, body = await unfinished_chunked_post(ingress.url, path, key, chunks=2)  # 128 KiB: past the cap
    assert status == 413 and body["error"]["code"] == "too_large"
    anonymous = ingress.client(None)
    bad = await call(
        "POST", anonymous, "/executions", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert bad.status_code == 401  # not a detailed 400: authentication comes first


@pytest.fixture
def strict_ingress(harness: Harness, tmp_path: Path) -> Iterator[Ingress]:
    """An ingress with a small event rate (one every 5 s, burst 3) and its docs behind `read`.

    Slow enough that no token comes back while a test sends its burst, however loaded the machine.
    """
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue},
        ingress={"api_keys_file": str(tmp_path / "keys.json"), "events_per_second": 0.2, "event_burst": 3},
    )
    store = KeyStore(settings.api_keys_path)
    keys = {"crm": store.add("crm", ["read", "events:*"]), "portal": store.add("portal", ["events:*"])}
    with serving(settings) as url:
        yield Ingress(url, keys)


async def test_docs_are_packaged_and_behind_read(strict_ingress: Ingress) -> None:
    crm, portal, anonymous = strict_ingress.client(), strict_ingress.client("portal"), strict_ingress.client(None)
    assert (await call("GET", anonymous, "/docs")).status_code == 401
    assert (await call("GET", anonymous, "/openapi.json")).status_code == 401
    assert (await call("GET", portal, "/openapi.json")).status_code == 403  # a key without `read`
    page = await call("GET", crm, "/docs")
    assert page.status_code == 200
    assert "cdn" not in page.text.lower() and "/docs/assets/swagger-ui-bundle.js" in page.text
    script = await call("GET", crm, "/docs/assets/swagger-ui-bundle.js")
    assert script.status_code == 200 and len(script.content) > 100_000
    assert (await call("GET", crm, "/openapi.json")).json()["info"]["title"] == "DSMO ingress"


def test_public_and_off_docs(harness: Harness, tmp_path: Path) -> None:
    public = harness.settings.with_changes(ingress={"api_keys_file": str(tmp_path / "keys.json"), "docs": "public"})
    with serving(public) as url:
        assert httpx.get(f"{url}/docs", timeout=10).status_code == 200
        assert httpx.get(f"{url}/openapi.json", timeout=10).status_code == 200
        assert httpx.get(f"{url}/executions", timeout=10).status_code == 401  # only the docs are public
    off = public.with_changes(ingress={"docs": "off"})
    key = KeyStore(off.api_keys_path).add("reader", ["read"])
    with serving(off) as url:
        answer = httpx.get(f"{url}/openapi.json", headers={"X-API-Key": key}, timeout=10)
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"


async def test_a_key_in_the_url_is_refused_and_kept_out_of_the_access_log(
    strict_ingress: Ingress, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="uvicorn.access")
    secret = strict_ingress.keys["crm"]
    anonymous = strict_ingress.client(None)
    answer = await call("GET", anonymous, "/executions", params={"status": "waiting", "api_key": secret})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "credential_in_url"
    assert "api_key" in answer.json()["error"]["message"] and secret not in answer.text
    # Even with a good header, a key in the URL is refused: it has already leaked.
    crm = strict_ingress.client()
    assert (await call("GET", crm, "/executions", params={"token": "x"})).status_code == 400
    # Other names, and a key under a name nobody thought of: it is recognised by its shape.
    for name in ("Authorization", "access-token", "bearer", "q"):
        answer = await call("GET", crm, "/executions", params={"status": "running", name: secret})
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "credential_in_url", name
        assert secret not in answer.text

    async def access_log() -> list[str]:  # the access log line is written after the answer
        return [record.getMessage() for record in caplog.records if record.name == "uvicorn.access"]

    logged = await polling.until_value(
        access_log,
        lambda logged: (
            any("status=waiting&api_key=[redacted]" in line for line in logged)
            and any("status=running&q=[redacted]" in line for line in logged)
        ),
        "the access log lines with the key redacted",
    )
    assert not any(secret in line for line in logged)


async def test_every_error_is_in_the_documented_shape(strict_ingress: Ingress) -> None:
    crm = strict_ingress.client()
    for method, path in [("GET", "/no/such/route"), ("DELETE", "/executions"), ("PUT", "/executions/r1/events")]:
        answer = await call(method, crm, path)
        assert answer.status_code in (404, 405), (method, path, answer.status_code)
        assert set(answer.json()) == {"error"} and answer.json()["error"]["code"] in ("not_found", "method_not_allowed")
    # They name the path, and a wrong method the methods the path takes (also in `Allow`, as HTTP asks).
    missing = await call("GET", crm, "/no/such/route")
    assert missing.json()["error"]["message"] == "no such path: /no/such/route"
    wrong = await call("PUT", crm, "/executions/r1/events")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert wrong.json()["error"]["message"] == "PUT is not allowed on /executions/r1/events; it takes POST"
    # Every method the path takes, from each of its routes (Starlette named the first route's only).
    # (`/hooks/failed` also matches `DELETE /hooks/{subscription_id}`.)
    for method, path, allowed in [("DELETE", "/executions", "GET, POST"), ("POST", "/hooks/failed", "GET, DELETE")]:
        wrong = await call(method, crm, path)
        assert wrong.status_code == 405 and wrong.headers["allow"] == allowed, (path, wrong.headers, wrong.text)
        assert wrong.json()["error"]["message"] == f"{method} is not allowed on {path}; it takes {allowed}"


async def test_events_are_rate_limited_per_key(strict_ingress: Ingress) -> None:
    crm, portal = strict_ingress.client(), strict_ingress.client("portal")
    event = {"type": "MESSAGE_RECEIVED", "event_id": "e1", "data": {"text": "hola"}}
    # No such run: each delivery inside the limit is answered 404; past the burst, 429.
    answers = [(await call("POST", crm, "/executions/no-such-run/events", json=event)) for _ in range(4)]
    assert [a.status_code for a in answers] == [404, 404, 404, 429]
    limited = answers[-1]
    assert limited.json()["error"]["code"] == "rate_limited" and int(limited.headers["retry-after"]) >= 1
    # Another key has its own budget; reads are not counted.
    assert (await call("POST", portal, "/executions/no-such-run/events", json=event)).status_code == 404
    assert (await call("GET", crm, "/executions/no-such-run")).status_code == 404
    await asyncio.sleep(float(limited.headers["retry-after"]))
    assert (await call("POST", crm, "/executions/no-such-run/events", json=event)).status_code == 404
