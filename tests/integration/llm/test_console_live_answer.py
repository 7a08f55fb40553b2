"""A run page opened while a model is writing shows that answer: the page hands its live stream a
position that names the attempt still open, so the stream sends the answer from its first token,
then the rest of the trail, nothing the page already shows twice."""

from __future__ import annotations

import asyncio
import html
import json
import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.llm_server import ChatServer, Reply
from dsmo.server.api_keys import KeyStore
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.console_session import sign_in
from tests.ingress_server import serving
from tests.integration.llm.test_live_stream import WORDS, writer

pytestmark = pytest.mark.integration

AFTER = re.compile(r'data-after="([^"]*)"')


async def console_stream(client: httpx.AsyncClient, path: str) -> list[dict[str, Any]]:
    """A console stream's items until `end`, read as a browser's EventSource reads them."""
    got: list[dict[str, Any]] = []
    async with client.stream("GET", path) as response:
        assert response.status_code == 200, await response.aread()
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            if "event" in fields:
                got.append({"id": fields.get("id"), "event": fields["event"], "data": json.loads(fields["data"])})
                if got[-1]["event"] == "end":
                    break
            fields = {}
    return got


async def test_a_run_page_opened_while_the_model_writes_streams_the_whole_answer(
    tool_harness: Harness, chat: ChatServer, tmp_path: Path
) -> None:
    settings = tool_harness.settings.with_changes(
        temporal={"task_queue": tool_harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    key = KeyStore(settings.api_keys_path).add("person", ["read"])
    chat.reply(Reply(content=" ".join(WORDS), token_delay=0.03))  # 200 tokens over ~6 s
    run_id = await tool_harness.start(parse_definition(writer(f"writer-{uuid.uuid4().hex[:6]}")))
    # The model has begun writing when the page is drawn.
    async for item in tool_harness.dsmo.stream(run_id):
        if item.kind == "token":
            break

    with serving(settings) as url, httpx.Client(base_url=url, timeout=30) as browser:
        await asyncio.to_thread(sign_in, browser, key)
        page = await asyncio.to_thread(browser.get, f"/console/runs/{run_id}")
        assert page.status_code == 200, page.text[:300]
        found = AFTER.search(page.text)
        assert found, "the page opens no live stream"
        after = html.unescape(found.group(1))
        async with httpx.AsyncClient(base_url=url, cookies=browser.cookies, timeout=60) as client:
            items = await asyncio.wait_for(console_stream(client, f"/console/runs/{run_id}/stream?after={after}"), 90)

    tokens = [item["data"]["text"] for item in items if item["event"] == "token"]
    assert "".join(tokens) == " ".join(WORDS), f"from {after!r}: {len(tokens)} tokens"  # all, from the first
    # The rest of the trail follows the page's last event, once each; the stage committed after
    # the page was drawn (it was drawn mid-answer).
    seqs = [item["data"]["seq"] for item in items if item["event"] == "event"]
    drawn_at = int(after.split(";", 1)[0])
    assert seqs == list(range(drawn_at + 1, drawn_at + 1 + len(seqs))), (after, seqs)
    types = [item["data"]["type"] for item in items if item["event"] == "event"]
    assert "STAGE_SUCCEEDED" in types and items[-1]["event"] == "end"
    assert not [item for item in items if item["event"] in ("abandoned", "error")]
