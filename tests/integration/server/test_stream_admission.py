"""Who may open a run's live stream, decided before it begins: one key (or one signed-in person)
holds at most `STREAMS_PER_KEY` streams even when it opens many at the same moment, and gets them
back when it hangs up; the console refuses a stream of a run that does not exist with its 404 page
(a browser's EventSource gives up on it), not with an error inside a 200 stream."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from dsmo.server.api_keys import KeyStore
from dsmo.server.sse import STREAMS_PER_KEY
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.console_session import sign_in
from tests.ingress_server import serving

pytestmark = pytest.mark.integration

AT_ONCE = 3 * STREAMS_PER_KEY  # opened at the same moment by one key


@dataclass
class Served:
    url: str
    key: str


@pytest.fixture
def served(harness: Harness, tmp_path: Path) -> Iterator[Served]:
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    key = KeyStore(settings.api_keys_path).add("watcher", ["read"])
    with serving(settings) as url:
        yield Served(url, key)


async def waiting_run(harness: Harness) -> str:
    """A run that waits an hour for a reply: its stream stays open."""
    definition = parse_definition(
        {
            "agent": f"held-{uuid.uuid4().hex[:6]}",
            "start": "ask",
            "nodes": {"ask": {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}}},
        }
    )
    run_id = await harness.start(definition)
    await harness.dsmo.run(run_id).wait_for_status({RunStatus.WAITING}, timeout=60)
    return run_id


@asynccontextmanager
async def opened_at_once(client: httpx.AsyncClient, path: str, count: int) -> AsyncIterator[list[int]]:
    """Open ``count`` streams at the same moment and hold those admitted; their statuses.
    Leaving hangs every one of them up."""
    held: list[httpx.Response] = []
    reading: list[AsyncIterator[bytes]] = []  # kept: a reader collected would hang its stream up

    async def open_one() -> int:
        response = await client.send(client.build_request("GET", path), stream=True)
        held.append(response)
        if response.status_code == 200:
            reading.append(response.aiter_raw())
            await anext(reading[-1])  # the body has begun: the stream is running
        return response.status_code

    try:
        yield list(await asyncio.gather(*(open_one() for _ in range(count))))
    finally:
        for response in held:
            await response.aclose()


async def admitted_then_given_back(client: httpx.AsyncClient, path: str) -> None:
    """A burst gets exactly the bound; once it hangs up, the next burst gets the whole bound again."""
    async with opened_at_once(client, path, AT_ONCE) as codes:
        assert sorted(set(codes)) == [200, 429] and codes.count(200) == STREAMS_PER_KEY, codes
    # Hung up: every count is given back (the server sees the disconnects within moments).
    deadline = asyncio.get_running_loop().time() + 15
    while True:
        async with opened_at_once(client, path, STREAMS_PER_KEY + 1) as codes:
            if codes.count(200) == STREAMS_PER_KEY or asyncio.get_running_loop().time() > deadline:
                break
        await asyncio.sleep(0.2)
    assert codes.count(200) == STREAMS_PER_KEY and codes.count(429) == 1, codes


def browser_limits() -> httpx.Limits:
    return httpx.Limits(max_connections=AT_ONCE + 8, max_keepalive_connections=AT_ONCE + 8)


async def test_one_key_holds_at_most_its_bound_of_api_streams_however_fast_it_opens_them(
    served: Served, harness: Harness
) -> None:
    run_id = await waiting_run(harness)
    headers = {"Authorization": f"Bearer {served.key}"}
    timeout = httpx.Timeout(30, read=None)
    async with httpx.AsyncClient(base_url=served.url, headers=headers, timeout=timeout, limits=browser_limits()) as api:
        await admitted_then_given_back(api, f"/executions/{run_id}/stream")
        # A stream refused before it began holds nothing.
        assert (await api.get("/executions/no-such-run/stream")).status_code == 404
        assert (await api.get(f"/executions/{run_id}/stream", params={"after": "x"})).status_code == 422
        async with opened_at_once(api, f"/executions/{run_id}/stream", STREAMS_PER_KEY) as codes:
            assert codes == [200] * STREAMS_PER_KEY, codes


async def test_one_person_holds_at_most_its_bound_of_console_streams_however_fast_they_open(
    served: Served, harness: Harness
) -> None:
    run_id = await waiting_run(harness)
    with httpx.Client(base_url=served.url, timeout=30) as browser:
        await asyncio.to_thread(sign_in, browser, served.key)
        cookies = browser.cookies
    timeout = httpx.Timeout(30, read=None)
    async with httpx.AsyncClient(base_url=served.url, cookies=cookies, timeout=timeout, limits=browser_limits()) as web:
        await admitted_then_given_back(web, f"/console/runs/{run_id}/stream")


async def test_the_console_refuses_a_stream_it_cannot_give_with_a_page_before_it_begins(
    served: Served, harness: Harness
) -> None:
    run_id = await waiting_run(harness)
    with httpx.Client(base_url=served.url, timeout=30) as browser:
        await asyncio.to_thread(sign_in, browser, served.key)
        refused = {
            "no such run": (await asyncio.to_thread(browser.get, "/console/runs/no-such-run/stream"), 404),
            "not a position": (await asyncio.to_thread(browser.get, f"/console/runs/{run_id}/stream?after=x"), 422),
            "past the trail": (await asyncio.to_thread(browser.get, f"/console/runs/{run_id}/stream?after=999"), 422),
        }
    for what, (answer, status) in refused.items():
        assert answer.status_code == status, (what, answer.status_code, answer.text[:300])
        assert answer.headers["content-type"].startswith("text/html"), (what, answer.headers["content-type"])
        assert "event: error" not in answer.text, what
    assert "no-such-run" in refused["no such run"][0].text
