"""The console's live pages in a real browser (Chromium through Playwright): a run page follows
its run's stream and shows the run completed without a reload, across the stream's reconnects;
the task list gains a new task without a reload."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, expect

from bench.llm_server import ChatServer, Reply
from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.llm_stage import LlmEndpoint
from dsmo.activities.messaging import FileChannel
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.server.api_keys import KeyStore
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.ingress_server import serving
from tests.integration.llm.test_live_stream import WORDS, writer
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


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    server = ChatServer()
    server.start()
    yield server
    server.go_on()  # a reply still paused ends, so the server stops at once
    server.stop()


@pytest_asyncio.fixture
async def writing(
    dsmo: DsmoClient, store: ArtifactStore, stack_settings: Settings, chat: ChatServer, tmp_path: Path
) -> AsyncIterator[tuple[Harness, Console]]:
    """A worker whose `llm` stages ask the chat server, and the console over its runs."""
    task_queue = f"live-writer-{uuid.uuid4().hex[:10]}"
    worker = build_worker(
        dsmo.temporal,
        task_queue=task_queue,
        store=store,
        channel=FileChannel(tmp_path / "outbox"),
        llm=LlmEndpoint(chat.url, default_model="local-default"),
    )
    settings = stack_settings.with_changes(
        temporal={"task_queue": task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    keys = {"person": KeyStore(settings.api_keys_path).add("person", ["read"])}
    async with worker:
        with serving(settings) as url:
            yield (
                Harness(dsmo, store, task_queue, tmp_path / "outbox", stack_settings),
                Console(url, keys, tmp_path, store),
            )


async def test_a_model_s_answer_being_written_stays_on_screen_when_the_page_redraws(
    writing: tuple[Harness, Console],
    chat: ChatServer,
    browser: Browser,  # noqa: F811 - the fixture
) -> None:
    harness, console = writing
    shown = 20
    chat.reply(Reply(content=" ".join(WORDS), pause_after=shown))
    run_id = await harness.start(parse_definition(writer(f"writer-{uuid.uuid4().hex[:6]}")))
    page = await new_page(browser)
    await console.sign_in(page, "person", then=f"/console/runs/{run_id}")
    box = page.get_by_label("The model is writing")
    written = " ".join(WORDS[:shown]) + " "
    await expect(box).to_have_text(written, timeout=30_000)  # the model stopped there, mid-answer

    # Whatever redraws the page meanwhile (a trail event of the run), the answer so far stays.
    await page.evaluate("window.__sameDocument = true")
    await page.evaluate("redraw()")
    await expect(box).to_have_text(written)
    chat.go_on()
    await expect(page.locator("[data-status]").first).to_have_text("completed", timeout=30_000)
    # The stage committed: the answer is the page's now, and the box is gone.
    await expect(box).to_have_count(0)
    assert await page.evaluate("window.__sameDocument") is True
