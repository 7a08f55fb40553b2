"""A start through the ingress answers for what it did: one `Idempotency-Key`, one start whatever
the body; its events count against the key's rate and are reported as the run took them; an event
for a run no worker serves is refused at once, not kept to be applied long after the caller left.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dsmo.activities.audit_log import audit_key
from dsmo.activities.definition_store import DefinitionStore
from dsmo.server.api_keys import KeyStore
from dsmo.server.ingress import start_idempotency
from tests.conftest import Harness, definition_from
from tests.ingress_server import serving
from tests.integration.runs.test_inbox import chat
from tests.integration.server.test_ingress import CANDIDATE, REPO, Ingress, call, ingress

pytestmark = pytest.mark.integration
__all__ = ["ingress"]  # the fixture, shared with test_ingress.py


async def test_one_idempotency_key_names_one_start_whatever_the_body(ingress: Ingress, harness: Harness) -> None:
    DefinitionStore(harness.store).publish(chat())
    crm = ingress.client()
    lead = {"Idempotency-Key": f"idem-{uuid.uuid4().hex[:8]}"}
    body = {"agent": "candidate-screening", "input": CANDIDATE}
    first = await call("POST", crm, "/executions", json=body, headers=lead)
    assert first.status_code == 201, first.text
    run_id = first.json()["runId"]
    again = await call("POST", crm, "/executions", json=body, headers=lead)
    assert again.status_code == 200 and again.json()["runId"] == run_id and again.json()["duplicate"] is True

    own_id = f"cand-{uuid.uuid4().hex[:10]}"
    for other in ({"agent": "inbox-chat"}, {**body, "runId": own_id}, {**body, "priority": 1}):
        refused = await call("POST", crm, "/executions", json=other, headers=lead)
        assert refused.status_code == 409, (other, refused.text)
        assert refused.json()["error"]["code"] == "run_exists"
        assert refused.json()["error"]["message"].startswith("Idempotency-Key: "), refused.text
        assert f"already started run {run_id!r} with another body" in refused.json()["error"]["message"]
    assert (await call("GET", crm, f"/executions/{own_id}")).status_code == 404  # nothing else started

    # Another caller's key has its own names: the same Idempotency-Key is another start.
    theirs = await call("POST", ingress.client("starter"), "/executions", json=body, headers=lead)
    assert theirs.status_code == 201 and theirs.json()["runId"] != run_id, theirs.text
    # A runId and an Idempotency-Key each name the run: both at once is refused, nothing started.
    both = await call(
        "POST", crm, "/executions", json={**body, "runId": own_id}, headers={"Idempotency-Key": uuid.uuid4().hex}
    )
    assert both.status_code == 422 and both.json()["error"]["message"].startswith("runId: "), both.text
    assert (await call("GET", crm, f"/executions/{own_id}")).status_code == 404
    # A blank key (a client's variable left unset) names no start: refused, not taken as none.
    # (Spaces around a header value are not part of it: "   " arrives as "".)
    blank = await call("POST", crm, "/executions", json={**body, "runId": own_id}, headers={"Idempotency-Key": ""})
    assert blank.status_code == 422, blank.text
    assert blank.json()["error"]["message"].startswith("Idempotency-Key: blank"), blank.text
    assert (await call("GET", crm, f"/executions/{own_id}")).status_code == 404


async def test_an_idempotency_key_whose_run_temporal_forgot_is_refused(
    ingress: Ingress, harness: Harness, tmp_path: Path
) -> None:
    # The pair's run ended long ago: Temporal's retention removed its history, the store keeps
    # its trail. A retry must neither start a second run under the id nor answer with a 404.
    idempotency_key = f"idem-{uuid.uuid4().hex[:8]}"
    crm_key = KeyStore(tmp_path / "keys.json").named("crm")  # the ingress fixture's keys
    assert crm_key is not None
    run_id = start_idempotency.idempotent_run_id(crm_key, idempotency_key)
    harness.store.put_json_bytes_once(audit_key(run_id), b'{"seq":1}\n', content_type="application/x-ndjson")
    body = {"agent": "candidate-screening", "input": CANDIDATE}
    refused = await call(
        "POST", ingress.client(), "/executions", json=body, headers={"Idempotency-Key": idempotency_key}
    )
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_exists", refused.text
    assert refused.json()["error"]["message"].startswith("Idempotency-Key: "), refused.text
    assert "audit trail is kept" in refused.json()["error"]["message"]
    assert (await call("GET", ingress.client(), f"/executions/{run_id}")).status_code == 404


async def test_a_start_reports_the_events_the_run_took_not_its_duplicates(ingress: Ingress, harness: Harness) -> None:
    DefinitionStore(harness.store).publish(chat())
    reply = {"type": "MESSAGE_RECEIVED", "event_id": "m-1", "data": {"text": "sí"}}
    started = await call(
        "POST", ingress.client(), "/executions", json={"agent": "inbox-chat", "events": [reply, reply]}
    )
    assert started.status_code == 201, started.text
    assert started.json()["eventsDelivered"] == 1, started.text
    first, second = started.json()["events"]
    assert first["accepted"] is True and first["duplicate"] is False
    assert second["accepted"] is False and second["duplicate"] is True
    trail = await harness.dsmo.events(started.json()["runId"])
    assert [e.type for e in trail if e.type == "DUPLICATE_IGNORED"] == ["DUPLICATE_IGNORED"]


@pytest.fixture
def slow_events(harness: Harness, tmp_path: Path) -> Iterator[Ingress]:
    """An ingress whose keys may deliver one event every 5 s, three at once."""
    DefinitionStore(harness.store).publish(definition_from(REPO / "examples" / "candidate_screening.yaml"))
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue},
        ingress={"api_keys_file": str(tmp_path / "keys.json"), "events_per_second": 0.2, "event_burst": 3},
    )
    keys = {"crm": KeyStore(settings.api_keys_path).add("crm", ["start", "read", "events:*"])}
    with serving(settings) as url:
        yield Ingress(url, keys)


async def test_a_starts_events_count_against_the_keys_event_rate(slow_events: Ingress) -> None:
    crm = slow_events.client()
    event = {"type": "MESSAGE_RECEIVED", "event_id": "e1", "data": {"text": "hola"}}
    for _ in range(2):
        assert (await call("POST", crm, "/executions/no-such-run/events", json=event)).status_code == 404
    # One token is left: a start with two events is refused whole, before anything starts.
    lead = {"Idempotency-Key": uuid.uuid4().hex}
    start = {"agent": "candidate-screening", "input": CANDIDATE, "events": [event, {**event, "event_id": "e2"}]}
    limited = await call("POST", crm, "/executions", json=start, headers=lead)
    assert limited.status_code == 429, limited.text
    assert limited.json()["error"]["code"] == "rate_limited" and int(limited.headers["retry-after"]) >= 1
    assert limited.json()["error"]["message"].startswith("events: "), limited.text
    # A start without events takes nothing from the budget; the token left still serves one event.
    assert (
        await call("POST", crm, "/executions", json={"agent": "candidate-screening", "input": CANDIDATE})
    ).is_success
    assert (await call("POST", crm, "/executions/no-such-run/events", json=event)).status_code == 404
    assert (await call("POST", crm, "/executions/no-such-run/events", json=event)).status_code == 429


@pytest.fixture
def unserved(harness: Harness, tmp_path: Path) -> Iterator[Ingress]:
    """An ingress that starts runs on a task queue no worker polls."""
    DefinitionStore(harness.store).publish(chat())
    settings = harness.settings.with_changes(
        temporal={"task_queue": f"unpolled-{uuid.uuid4().hex[:10]}"},
        ingress={"api_keys_file": str(tmp_path / "keys.json")},
    )
    keys = {"crm": KeyStore(settings.api_keys_path).add("crm", ["start", "read", "events:*"])}
    with serving(settings) as url:
        yield Ingress(url, keys)


async def test_an_event_for_a_run_no_worker_serves_is_refused_at_once(unserved: Ingress, harness: Harness) -> None:
    # A short client deadline: an answer that waits for a worker fails the test instead of hanging it.
    crm = httpx.Client(base_url=unserved.url, headers={"Authorization": f"Bearer {unserved.keys['crm']}"}, timeout=20)
    started = await call("POST", crm, "/executions", json={"agent": "inbox-chat"})
    assert started.status_code == 201, started.text  # a run waits for its worker; only its events need one now
    run_id = started.json()["runId"]
    try:
        reply = {"type": "MESSAGE_RECEIVED", "event_id": "m-1", "data": {"text": "sí"}}
        asked = time.monotonic()
        refused = await call("POST", crm, f"/executions/{run_id}/events", json=reply)
        assert refused.status_code == 503, refused.text
        # Answered by the update's watch (its first look, after a few seconds with no answer):
        # Temporal keeps a sent update until a worker comes, so the caller learns how to find out.
        assert refused.json()["error"]["code"] == "no_worker" and "send it again with event_id" in refused.text
        assert time.monotonic() - asked < 10

        lead = {"Idempotency-Key": uuid.uuid4().hex}
        with_events = await call(
            "POST", crm, "/executions", json={"agent": "inbox-chat", "events": [reply]}, headers=lead
        )
        assert with_events.status_code == 503, with_events.text
        assert (
            with_events.json()["error"]["message"].startswith("events: ") and "nothing was started" in with_events.text
        )
        again = await call("POST", crm, "/executions", json={"agent": "inbox-chat", "events": [reply]}, headers=lead)
        assert again.status_code == 503, again.text  # no run was left behind under the key's name
    finally:
        await harness.dsmo.temporal.get_workflow_handle(run_id).terminate(reason="test over")


async def test_a_start_names_its_version_by_hash_or_label(ingress: Ingress, harness: Harness) -> None:
    store = DefinitionStore(harness.store)
    first, second = chat(version="7.1.0"), chat(version="7.2.0")
    assert first.workflow_version != second.workflow_version
    for definition in (first, second):
        store.publish(definition)
    crm = ingress.client()
    # By label, as `dsmo start --version` takes it (a label was a 422: only a hash matched), or by hash.
    for version, expected in (("7.1.0", first), (second.workflow_version, second), ("7.2.0", second)):
        started = await call("POST", crm, "/executions", json={"agent": "inbox-chat", "version": version})
        assert started.status_code == 201, (version, started.text)
        assert started.json()["workflowVersion"] == expected.workflow_version, version
        harness.started.append(started.json()["runId"])
    unknown = await call("POST", crm, "/executions", json={"agent": "inbox-chat", "version": "9.9.9"})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_version", unknown.text
    assert "no published version '9.9.9' (hash or label)" in unknown.json()["error"]["message"]
    nobody = await call("POST", crm, "/executions", json={"agent": "no-such-agent", "version": "9.9.9"})
    assert nobody.status_code == 404 and nobody.json()["error"]["code"] == "unknown_agent", nobody.text
