"""A long trail is read a page at a time: the client, `dsmo events` and the console's run page.

A run that continues as new every few events leaves its trail in many segments; pages of it
continue exactly where the last ended (no gap, no repeat), while it runs and after it ended.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dsmo.client.trail_pages import TrailPage
from dsmo.client.trail_store import TrailStore
from dsmo.server.api_keys import KeyStore
from dsmo.server.console.pages import TRAIL_PAGE
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness
from tests.console_session import sign_in
from tests.ingress_server import serving
from tests.polling import until_value

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
MESSAGES = 120


def chat_loop() -> AgentDefinition:
    return parse_definition(
        {
            "agent": "paged-chat",
            "start": "listen",
            "nodes": {
                "listen": {
                    "actionType": "wait_for_event",
                    "parameters": {"event": "message", "timeout": "30d", "onTimeout": "fail"},
                    "transitions": [{"when": 'eventResult == "stop"', "to": "bye"}, {"to": "listen"}],
                },
                "bye": {"actionType": "send_message", "parameters": {"message": "bye"}},
            },
        }
    )


def seqs(page: TrailPage) -> list[int]:
    return [event.seq for event in page.events]


async def walk(harness: Harness, run_id: str, limit: int) -> list[int]:
    """The trail's sequence numbers read page by page with each next cursor, checking each page's size."""
    read: list[int] = []
    cursor: int | None = 0
    while cursor is not None:
        page = await harness.dsmo.events_page(run_id, after=cursor, limit=limit)
        assert len(page.events) == min(limit, page.total - cursor)
        assert seqs(page) == list(range(cursor + 1, cursor + 1 + len(page.events)))
        read += seqs(page)
        cursor = page.next_after
    return read


async def cli(harness: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [str(BIN / "dsmo"), *args], capture_output=True, text=True, env=harness.cli_env(), timeout=60
    )


@pytest.fixture
def served(harness: Harness, tmp_path: Path) -> Iterator[tuple[str, str]]:
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    key = KeyStore(settings.api_keys_path).add("person", ["read"])
    with serving(settings) as url:
        yield url, key


async def test_a_long_trail_is_read_a_page_at_a_time(harness: Harness, served: tuple[str, str]) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(chat_loop(), history_limit=30)
    for index in range(MESSAGES):
        ack = await dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "said", "data": {"n": index}})
        assert ack.accepted, (index, ack)

    # While it runs: its trail is in segments (and the run's own tail). Read once it waits again
    # after the last message: an event's answer comes before the run records its next wait.
    whole = await until_value(
        lambda: dsmo.events(run_id, live=True),
        lambda trail: trail[-1].type == "RUN_WAITING" and sum(e.type == "RUN_WAITING" for e in trail) == MESSAGES + 1,
        "the run waiting after its last message",
    )
    total = len(whole)
    assert [event.seq for event in whole] == list(range(1, total + 1)) and total > 3 * TRAIL_PAGE // 2
    view = await dsmo.trail(run_id)
    assert view.head.segments > 5, view.head
    latest = await dsmo.events_page(run_id, limit=50)
    assert seqs(latest) == list(range(total - 49, total + 1)) and latest.next_after is None
    older = await dsmo.events_page(run_id, before=latest.previous_before, limit=50)
    assert seqs(older) == list(range(total - 99, total - 49))
    assert await walk(harness, run_id, 37) == list(range(1, total + 1))
    # The first page reads the first segment alone, not the trail.
    store = TrailStore(harness.store)
    first = await asyncio.to_thread(store.segment_window, run_id, view.head.segments, view.head.seq, 0, 5)
    assert [event.seq for event in first] == [1, 2, 3, 4, 5] and len(store._segments) == 1

    url, key = served
    with httpx.Client(base_url=url, timeout=60) as browser:
        await asyncio.to_thread(sign_in, browser, key)
        page = (await asyncio.to_thread(browser.get, f"/console/runs/{run_id}")).text
        assert page.count('<li data-type="') == TRAIL_PAGE
        assert f"of {total}" in page and f'href="/console/runs/{run_id}?before={total - TRAIL_PAGE + 1}' in page
        start = (await asyncio.to_thread(browser.get, f"/console/runs/{run_id}?after=0")).text
        assert start.count('<li data-type="') == TRAIL_PAGE and f"?after={TRAIL_PAGE}" in start
        bad = await asyncio.to_thread(browser.get, f"/console/runs/{run_id}?after=x")
        assert bad.status_code == 422 and "after: must be a sequence number" in bad.text

    # Ended: its export is paged the same way.
    assert (await dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "stop"})).accepted
    assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
    ended = await dsmo.events(run_id)
    assert await walk(harness, run_id, 64) == list(range(1, len(ended) + 1))

    default = await cli(harness, "events", run_id, "--json")
    assert default.returncode == 0, default.stderr
    shown = [json.loads(line)["seq"] for line in default.stdout.splitlines()]
    assert shown == list(range(len(ended) - 99, len(ended) + 1))
    assert f"--before {len(ended) - 99}" in default.stderr
    forward = await cli(harness, "events", run_id, "--json", "--after", "10", "--limit", "5")
    assert [json.loads(line)["seq"] for line in forward.stdout.splitlines()] == [11, 12, 13, 14, 15]
    assert "--after 15" in forward.stderr
    everything = await cli(harness, "events", run_id, "--json", "--all")
    assert everything.returncode == 0, everything.stderr
    assert everything.stdout.splitlines() == [event.model_dump_json() for event in ended]
    refused = await cli(harness, "events", run_id, "--limit", "0")
    assert refused.returncode != 0 and "limit: must be between 1 and 1000" in refused.stderr
