"""A run whose workflow task keeps failing: an event for it is refused in the documented shape
(JSON from the API, a page from the console) naming the failure, and nothing reaches a client as
plain text, whatever a route raises."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from dsmo.activities.definition_store import DefinitionStore
from dsmo.activities.messaging import FileChannel
from dsmo.client.dsmo_client import DsmoClient
from dsmo.server.api_keys import KeyStore
from dsmo.worker import build_worker
from tests.conftest import Harness
from tests.console_session import csrf_of, sign_in
from tests.ingress_server import serving

pytestmark = pytest.mark.integration
# A node kind this worker does not know: the run's first workflow task fails, and keeps failing.
FROM_THE_FUTURE = {"agent": "future", "start": "a", "nodes": {"a": {"actionType": "teleport"}}}


@dataclass
class Served:
    url: str
    key: str


@pytest.fixture
def served(harness: Harness, tmp_path: Path) -> Iterator[Served]:
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    key = KeyStore(settings.api_keys_path).add("person", ["read", "start", "cancel", "events:*"])
    with serving(settings) as url:
        yield Served(url, key)


@pytest_asyncio.fixture
async def failing_run(harness: Harness) -> AsyncIterator[str]:
    """A run whose workflow task has failed and been retried (Temporal retries it for ever)."""
    queue, run_id = f"failing-{uuid.uuid4().hex[:8]}", f"future-{uuid.uuid4().hex[:8]}"
    dsmo = DsmoClient(harness.dsmo.temporal, harness.settings)
    async with build_worker(dsmo.temporal, task_queue=queue, store=harness.store, channel=FileChannel(harness.outbox)):
        await dsmo.temporal.start_workflow(
            "AgentExecution",
            {"definition": FROM_THE_FUTURE, "input": {}},
            id=run_id,
            task_queue=queue,
            task_timeout=timedelta(seconds=1),
        )
        deadline = time.monotonic() + 60  # a hang guard, not a measure
        while (await dsmo.status(run_id)).workflow_task_failure is None:
            assert time.monotonic() < deadline, "the run's workflow task never failed twice"
            await asyncio.sleep(0.5)
        try:
            yield run_id
        finally:
            with contextlib.suppress(Exception):
                await dsmo.temporal.get_workflow_handle(run_id).terminate("test over")


async def call(client: httpx.Client, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return await asyncio.to_thread(client.request, method, path, **kwargs)


async def test_an_event_for_a_failing_run_is_refused_in_the_documented_shape(served: Served, failing_run: str) -> None:
    event = {"type": "MESSAGE_RECEIVED", "event_id": "e-1", "data": {"text": "hola"}}
    with httpx.Client(base_url=served.url, headers={"X-API-Key": served.key}, timeout=60) as api:
        answer = await call(api, "POST", f"/executions/{failing_run}/events", json=event)
    assert answer.status_code == 409, answer.text
    assert answer.headers["content-type"] == "application/json"
    error = answer.json()["error"]
    assert error["code"] == "workflow_task_failing"
    assert "workflow task failing" in error["message"] and "teleport" in error["message"]
    assert "same event id" in error["message"]

    with httpx.Client(base_url=served.url, timeout=60) as browser:
        assert (await asyncio.to_thread(sign_in, browser, served.key)).status_code == 303
        token = csrf_of((await call(browser, "GET", "/console/")).text)
        form = {"csrf_token": token, "event_type": "MESSAGE_RECEIVED", "event_id": "console-e2", "text": "hola"}
        page = await call(browser, "POST", f"/console/runs/{failing_run}/events", data=form)
    assert page.status_code == 409, page.text
    assert page.headers["content-type"].startswith("text/html")
    assert "workflow task failing" in page.text and "teleport" in page.text


async def test_an_unexpected_error_is_answered_in_the_documented_shape(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(DsmoClient, "status", broken)
    monkeypatch.setattr(DefinitionStore, "agents", broken)
    with httpx.Client(base_url=served.url, headers={"X-API-Key": served.key}, timeout=30) as api:
        answer = await call(api, "GET", "/executions/some-run")
    assert answer.status_code == 500 and answer.headers["content-type"] == "application/json"
    assert answer.json()["error"]["code"] == "internal_error"
    assert "RuntimeError" in answer.json()["error"]["message"] and "a bug" not in answer.text
    with httpx.Client(base_url=served.url, timeout=30) as browser:
        await asyncio.to_thread(sign_in, browser, served.key)
        page = await call(browser, "GET", "/console/definitions")
    assert page.status_code == 500 and page.headers["content-type"].startswith("text/html")
    assert "Something went wrong" in page.text and "RuntimeError" in page.text
