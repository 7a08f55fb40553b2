"""`dsmo mcp` driven by the `mcp` package's own client, over stdio and streamable HTTP: a run started,
found waiting, answered and read completed through the tools; keys without the scope refused."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from dsmo.activities.definition_store import DefinitionStore
from dsmo.server.api_keys import KeyStore
from dsmo.workflows.definition.model import parse_definition
from tests import polling
from tests.conftest import Harness
from tests.stack import free_port_block

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]
TOOLS = {
    "list_agents",
    "start_run",
    "run_status",
    "run_events",
    "list_tasks",
    "respond",
    "deliver_event",
    "decide",
    "decide_budget",
}


@dataclass
class Served:
    """What a test needs of the server's world: the agent it published, the keys, the environment."""

    agent: str
    keys: dict[str, str]
    env: dict[str, str]


@pytest.fixture
def served(harness: Harness, tmp_path: Path) -> Served:
    agent = f"mcp-echo-{uuid.uuid4().hex[:8]}"
    DefinitionStore(harness.store).publish(
        parse_definition(
            {
                "agent": agent,
                "start": "ask",
                "nodes": {
                    "ask": {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "thank"},
                    "thank": {"actionType": "send_message", "parameters": {"to": "x", "message": "gracias"}},
                },
            }
        )
    )
    keys_file = tmp_path / "keys.json"
    store = KeyStore(keys_file)
    keys = {
        "assistant": store.add("assistant", ["read", "start", "events:MESSAGE_RECEIVED"]),
        "reader": store.add("reader", ["read"]),
        "webhook": store.add("webhook", ["read", "events:*"]),
    }
    # cli_env carries the harness's task queue (DSMO_TASK_QUEUE): runs the server starts reach its worker.
    return Served(agent, keys, {**harness.cli_env(), "DSMO_API_KEYS_FILE": str(keys_file)})


def answer(result: CallToolResult) -> dict[str, Any]:
    assert not result.isError, result.content
    return result.structuredContent or json.loads(result.content[0].text)  # type: ignore[union-attr]


def refusal(result: CallToolResult) -> str:
    assert result.isError
    return str(result.content[0].text)  # type: ignore[union-attr]


async def until(session: ClientSession, run_id: str, status: str) -> dict[str, Any]:
    """The run's status once it has reached ``status``."""

    async def view() -> dict[str, Any]:
        return answer(await session.call_tool("run_status", {"run_id": run_id}))

    return await polling.until_value(view, lambda view: view["status"] == status, f"{run_id} reaches {status}")


async def listed_as_task(session: ClientSession, run_id: str) -> dict[str, Any]:
    """The run's task once the task list (visibility, updated asynchronously) lists it."""

    async def tasks() -> dict[str, Any]:
        return answer(await session.call_tool("list_tasks", {"run": run_id}))

    page = await polling.until_value(tasks, lambda page: bool(page["tasks"]), f"{run_id} listed as a task")
    return page["tasks"][0]  # type: ignore[no-any-return]


async def start_and_find_waiting(session: ClientSession, agent: str) -> str:
    """Start a run through the tools and find it waiting, by its status and in the task list."""
    assert agent in [row["agent"] for row in answer(await session.call_tool("list_agents", {}))["agents"]]
    run_id = str(answer(await session.call_tool("start_run", {"agent": agent, "input": {"name": "Ana"}}))["runId"])
    waiting = await until(session, run_id, "waiting")
    assert (waiting["waitingFor"], waiting["currentNode"]) == ("response", "ask")
    task = await listed_as_task(session, run_id)
    assert (task["runId"], task["agent"], task["kind"]) == (run_id, agent, "response")
    return run_id


async def test_over_stdio_a_run_is_started_answered_and_read(served: Served) -> None:
    env = {**served.env, "DSMO_MCP_KEY": served.keys["assistant"]}
    server = StdioServerParameters(command=sys.executable, args=["-m", "dsmo.cli.main", "mcp"], env=env, cwd=REPO)
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
        run_id = await start_and_find_waiting(session, served.agent)

        refused = refusal(await session.call_tool("decide", {"run_id": run_id, "decision": "approve"}))
        assert "lacks the scope 'events:TOOL_DECIDED'" in refused and "\n" not in refused
        unknown = refusal(await session.call_tool("start_run", {"agent": "no-such-agent"}))
        assert "no-such-agent" in unknown and "\n" not in unknown
        missing = refusal(await session.call_tool("respond", {"run_id": run_id}))
        assert missing.endswith("respond: text: Field required"), missing

        ack = answer(await session.call_tool("respond", {"run_id": run_id, "text": "sí", "event_id": "m-1"}))
        assert ack["accepted"] is True
        done = await until(session, run_id, "completed")
        assert done["path"][:2] == ["ask", "thank"]
        trail = answer(await session.call_tool("run_events", {"run_id": run_id, "after": 0, "limit": 1000}))
        assert {"RUN_CREATED", "RUN_WAITING", "RUN_RESUMED", "RUN_COMPLETED"} <= {e["type"] for e in trail["events"]}


@pytest_asyncio.fixture
async def http_server(served: Served, tmp_path: Path) -> AsyncIterator[str]:
    port = free_port_block(1)
    command = [sys.executable, "-m", "dsmo.cli.main", "mcp", "--http", "--bind", f"127.0.0.1:{port}"]
    log = tmp_path / "mcp.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(command, env=served.env, cwd=REPO, stderr=stderr)
    try:

        def listening() -> bool:  # start-up takes a few seconds
            assert process.poll() is None, log.read_text()
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", port)) == 0

        await polling.until(listening, "the MCP server listens", pause=0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)
    # The server has stopped, every session the test opened ended before: none left an error.
    logged = log.read_text()
    assert "Traceback" not in logged and "ERROR" not in logged, logged


@asynccontextmanager
async def session_with(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_over_http_each_request_is_authorised_by_its_key(served: Served, http_server: str) -> None:
    with pytest.raises(Exception) as unknown:  # the SDK raises the 401 inside a task group
        async with session_with(http_server, {"Authorization": "Bearer dsmo_not-a-key"}):
            pass
    assert "401" in repr(unknown.value.exceptions if isinstance(unknown.value, ExceptionGroup) else unknown.value)

    async with session_with(http_server, {"Authorization": f"Bearer {served.keys['reader']}"}) as reader:
        assert {tool.name for tool in (await reader.list_tools()).tools} == TOOLS
        refused = refusal(await reader.call_tool("start_run", {"agent": served.agent}))
        assert "key 'reader' lacks the scope 'start'" in refused and "\n" not in refused

    async with session_with(http_server, {"X-API-Key": served.keys["assistant"]}) as assistant:
        run_id = await start_and_find_waiting(assistant, served.agent)

    async with session_with(http_server, {"Authorization": f"Bearer {served.keys['webhook']}"}) as webhook:
        refused = refusal(await webhook.call_tool("decide", {"run_id": run_id, "decision": "approve"}))
        assert "key 'webhook' lacks the scope 'events:TOOL_DECIDED'" in refused  # events:* grants no decision
        reply = {"run_id": run_id, "event_type": "MESSAGE_RECEIVED", "data": {"text": "sí"}, "event_id": "m-1"}
        assert answer(await webhook.call_tool("deliver_event", reply))["accepted"] is True
        assert answer(await webhook.call_tool("deliver_event", reply))["duplicate"] is True
        await until(webhook, run_id, "completed")
