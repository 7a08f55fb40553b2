"""The console over plain HTTP: every error is a page, sessions end when people sign out or their
key is revoked, sign-in attempts are limited per address, and a bad page token is refused at once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsmo.client.task_list import FilterError, TaskFilter, task_page
from dsmo.config.settings import Settings
from dsmo.server.api_keys import KeyStore
from dsmo.server.console.form_actions import SIGN_IN_FAILURE_BURST
from tests.conftest import Harness
from tests.console_session import csrf_of, sign_in
from tests.ingress_server import serving

pytestmark = pytest.mark.integration


@dataclass
class Served:
    url: str
    keys: KeyStore
    key: str
    settings: Settings

    def browser(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)


@pytest.fixture
def served(harness: Harness, tmp_path: Path) -> Iterator[Served]:
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    keys = KeyStore(settings.api_keys_path)
    key = keys.add("person", ["read", "events:*"])
    with serving(settings) as url:
        yield Served(url, keys, key, settings)


def is_page(answer: httpx.Response, status: int, *words: str) -> None:
    assert answer.status_code == status, (answer.status_code, answer.text[:300])
    assert answer.headers["content-type"].startswith("text/html"), answer.headers["content-type"]
    assert answer.headers["x-frame-options"] == "DENY" and answer.headers["cache-control"] == "no-store"
    for word in words:
        assert word in answer.text, (word, answer.text[:600])


async def test_every_console_error_is_a_page_naming_the_problem(served: Served) -> None:
    with served.browser() as browser:
        await asyncio.to_thread(sign_in, browser, served.key)
        get = browser.get
        is_page(await asyncio.to_thread(get, "/console/nope"), 404, "no console page at /console/nope")
        is_page(await asyncio.to_thread(get, "/console/?overdue=maybe"), 422, "overdue:")
        is_page(await asyncio.to_thread(get, "/console/?token=x"), 400, "token:", "sign in with the form")
        is_page(await asyncio.to_thread(get, "/console/runs/a%20b"), 422, "run:")
        answer = await asyncio.to_thread(browser.delete, "/console/")
        is_page(answer, 405)
        too_large = await asyncio.to_thread(browser.post, "/console/login", content=b"a=" + b"x" * 70_000)
        is_page(too_large, 413, "the limit is 65536")
        # Signed in, an error page keeps the menu.
        assert "Sign out" in (await asyncio.to_thread(get, "/console/nope")).text
    # The API keeps its JSON.
    with httpx.Client(base_url=served.url, headers={"X-API-Key": served.key}, timeout=30) as api:
        answer = await asyncio.to_thread(api.get, "/nope")
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"


async def test_a_bogus_page_token_is_refused_without_retrying(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = harness.dsmo.temporal.workflow_service
    calls: list[dict[str, Any]] = []
    listing = service.list_workflow_executions

    async def recorded(request: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return await listing(request, **kwargs)

    monkeypatch.setattr(service, "list_workflow_executions", recorded)
    with pytest.raises(FilterError, match="page: not a page of this list"):
        await task_page(harness.dsmo.core, TaskFilter(run="nobody-"), datetime.now(UTC), page="QUJD")
    # Temporal's "Unknown" answer to a token it cannot read is not a hiccup: asked once, not retried.
    assert [call.get("retry") for call in calls] == [False]


async def test_a_bogus_page_token_gets_the_task_list_with_the_field_named(served: Served) -> None:
    with served.browser() as browser:
        await asyncio.to_thread(sign_in, browser, served.key)
        is_page(await asyncio.to_thread(browser.get, "/console/?page=QUJD"), 422, "page: not a page of this list")


async def test_signing_out_ends_the_session_for_every_copy_of_the_cookie(served: Served) -> None:
    with served.browser() as browser, served.browser() as thief:
        assert (await asyncio.to_thread(sign_in, browser, served.key)).status_code == 303
        thief.cookies.set("dsmo_session", browser.cookies["dsmo_session"], path="/console")
        assert (await asyncio.to_thread(thief.get, "/console/")).status_code == 200  # a working copy
        token = csrf_of((await asyncio.to_thread(browser.get, "/console/")).text)
        out = await asyncio.to_thread(browser.post, "/console/logout", data={"csrf_token": token})
        assert out.status_code == 303 and out.headers["location"] == "/console/login?notice=signed-out"
        after = await asyncio.to_thread(thief.get, "/console/")
        assert after.status_code == 303 and after.headers["location"].startswith("/console/login")
        # Another session of the same key is not affected.
        with served.browser() as other:
            assert (await asyncio.to_thread(sign_in, other, served.key)).status_code == 303
            assert (await asyncio.to_thread(other.get, "/console/")).status_code == 200


async def test_revoking_a_key_ends_its_sessions(served: Served) -> None:
    with served.browser() as browser:
        await asyncio.to_thread(sign_in, browser, served.key)
        assert (await asyncio.to_thread(browser.get, "/console/")).status_code == 200
        assert served.keys.revoke("person")
        after = await asyncio.to_thread(browser.get, "/console/")
        assert after.status_code == 303 and after.headers["location"].startswith("/console/login")


async def test_sign_in_is_limited_per_address_with_a_warning(served: Served, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="dsmo.console")
    with served.browser() as browser:
        wrong = [(await asyncio.to_thread(sign_in, browser, "dsmo_wrong")) for _ in range(SIGN_IN_FAILURE_BURST)]
        assert [answer.status_code for answer in wrong] == [401] * SIGN_IN_FAILURE_BURST
        limited = await asyncio.to_thread(sign_in, browser, "dsmo_wrong")
        is_page(limited, 429, "too many wrong keys from this address")
        assert int(limited.headers["retry-after"]) >= 1
        # Until the wait is over even the right key is refused: guessing cannot go on meanwhile.
        assert (await asyncio.to_thread(sign_in, browser, served.key)).status_code == 429
    warnings = [record.getMessage() for record in caplog.records if record.name == "dsmo.console"]
    assert any("sign-in from 127.0.0.1 refused" in line for line in warnings), warnings
