"""The console's live pages in a real browser (Chromium through Playwright): a run page follows
its run's stream and shows the run completed without a reload, across the stream's reconnects;
the task list gains a new task without a reload."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect

from dsmo.server.api_keys import KeyStore
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.ingress_server import serving
from tests.polling import until_value
from tests.ui.test_console import CHROMIUM, Console, browser, new_page  # noqa: F401 - the fixture

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make ui-check)"),
]


def waiter(agent: str) -> Any:
    """An agent that waits for a reply, then for an event, then thanks."""
    return parse_definition(
        {
            "agent": agent,
            "start": "ask",
            "nodes": {
                "ask": {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "confirm"},
                "confirm": {
                    "actionType": "wait_for_event",
                    "parameters": {"event": "confirmed", "timeout": "1h"},
                    "next": "done",
                },
                "done": {"actionType": "send_message", "parameters": {"message": "thanks"}},
            },
        }
    )


@pytest.fixture
def live_console(harness: Harness, tmp_path: Path) -> Iterator[Console]:
    """The console, its streams ending every 1.5 s so the browser reconnects while a test watches."""
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue},
        ingress={"api_keys_file": str(tmp_path / "keys.json"), "stream_lifetime": 1.5},
    )
    keys = {"person": KeyStore(settings.api_keys_path).add("person", ["read", "events:*"])}
    with serving(settings) as url:
        yield Console(url, keys, tmp_path, harness.store)


async def waiting_run(harness: Harness) -> str:
    run_id = await harness.start(waiter(f"live-{uuid.uuid4().hex[:6]}"))
    await harness.dsmo.run(run_id).wait_for_status({RunStatus.WAITING}, timeout=60)
    return run_id


async def streams_opened(page: Page, at_least: int, opened: list[str]) -> None:

    async def streams() -> list[str]:
        return opened

    await until_value(streams, lambda opened: len(opened) >= at_least, f"the page opens {at_least} streams")


async def test_a_run_page_shows_its_run_completed_without_a_reload_across_reconnects(
    live_console: Console,
    harness: Harness,
    browser: Browser,  # noqa: F811 - the fixture
) -> None:
    run_id = await waiting_run(harness)
    page = await new_page(browser)
    opened: list[str] = []
    resumed: list[str] = []

    async def seen(request: Any) -> None:
        if "/stream" in request.url:
            opened.append(request.url)
            resumed.append((await request.all_headers()).get("last-event-id", ""))

    page.on("request", seen)
    await live_console.sign_in(page, "person", then=f"/console/runs/{run_id}")
    await expect(page.get_by_role("heading", name="Waiting for response")).to_be_visible()
    await page.evaluate("window.__sameDocument = true")  # gone if the page were loaded again
    await streams_opened(page, 3, opened)  # the server ended it twice; the browser came back each time

    await harness.dsmo.respond(run_id, "yes, I'll come")
    await expect(page.get_by_role("heading", name="Waiting for event")).to_be_visible(timeout=30_000)
    seen_before = len(opened)
    await streams_opened(page, seen_before + 2, opened)  # reconnects after items arrived
    await harness.dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "confirmed"})
    await expect(page.locator("[data-status]").first).to_have_text("completed", timeout=30_000)
    assert await page.evaluate("window.__sameDocument") is True
    # The first stream starts where the page was drawn (?after=); a reconnect after items came
    # resumes after the last one it got (the browser's Last-Event-ID).
    assert "?after=" in opened[0] and resumed[0] == ""
    assert any(resumed[seen_before:]), resumed


async def test_the_task_list_gains_a_new_task_without_a_reload(
    live_console: Console,
    harness: Harness,
    browser: Browser,  # noqa: F811 - the fixture
) -> None:
    page = await new_page(browser)
    await live_console.sign_in(page, "person")
    await expect(page.get_by_role("heading", name="Tasks")).to_be_visible()
    await page.evaluate("window.__sameDocument = true")
    run_id = await waiting_run(harness)

    await expect(page.locator(f'tr[data-run="{run_id}"]')).to_be_visible(timeout=30_000)
    assert await page.evaluate("window.__sameDocument") is True
    await harness.dsmo.respond(run_id, "done")  # leaves no task waiting behind the test
