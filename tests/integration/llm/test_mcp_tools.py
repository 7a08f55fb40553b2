"""Tools served by an MCP server the test starts (the `mcp` package's own FastMCP, over streamable
HTTP or stdio): a run's model calls one through the worker's settings (address and headers never
in the definition), with the call's idempotency key; a server that is down is retried until it is
back; a worker lists its servers' tools, and publishing refuses a tool no server lists."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import uvicorn
from mcp.server.fastmcp import FastMCP
from starlette.types import ASGIApp, Receive, Scope, Send

from bench.llm_server import ChatServer, Reply
from dsmo.activities.actions import ActionRegistry
from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.catalog_publishing import describe, published
from dsmo.activities.llm_stage import LlmEndpoint
from dsmo.activities.mcp_calls import list_mcp_tools
from dsmo.activities.messaging import FileChannel
from dsmo.activities.processors import ProcessorRegistry
from dsmo.client.client_errors import NotOffered
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.integration.llm.support_agent import ORDERS, TICKET, support
from tests.polling import until_value
from tests.stack import free_port_block

pytestmark = pytest.mark.integration


class OrdersServer:
    """An MCP server with one tool, `lookup`, that keeps the headers each request came with."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.lookups: list[str] = []
        self.headers: list[dict[str, str]] = []
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def app(self) -> ASGIApp:
        mcp = FastMCP("orders", stateless_http=True, json_response=True)

        @mcp.tool()
        def lookup(order: str) -> dict[str, Any]:
            """An order's status and total."""
            self.lookups.append(order)
            if order not in ORDERS:
                raise ValueError(f"no order {order}")
            return ORDERS[order]

        inner = mcp.streamable_http_app()

        async def recording(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and scope["method"] == "POST":
                self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
            await inner(scope, receive, send)

        return recording

    def start(self) -> None:
        config = uvicorn.Config(self.app(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            assert time.monotonic() < deadline, "the MCP server did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)


@pytest.fixture
def orders_server() -> Iterator[OrdersServer]:
    server = OrdersServer(free_port_block(1))
    yield server
    server.stop()


@pytest_asyncio.fixture
async def mcp_harness(
    dsmo: DsmoClient,
    store: ArtifactStore,
    tmp_path: Path,
    stack_settings: Settings,
    chat: ChatServer,
    orders_server: OrdersServer,
) -> AsyncIterator[Harness]:
    task_queue = f"mcp-{uuid.uuid4().hex[:10]}"
    worker = build_worker(
        dsmo.temporal,
        task_queue=task_queue,
        store=store,
        channel=FileChannel(tmp_path / "outbox"),
        llm=LlmEndpoint(chat.url),
        mcp_servers={"orders": (orders_server.url, {"X-Orders-Token": "from-the-settings"})},
    )
    async with worker:
        harness = Harness(dsmo, store, task_queue, tmp_path / "outbox", stack_settings)
        yield harness
    await harness.replay_all()


def looked_up_by_mcp(**think: Any) -> dict[str, Any]:
    """The guide's support agent whose lookup is the MCP server's tool (the refund stays an action)."""
    definition = support(f"support-{uuid.uuid4().hex[:6]}", **think)
    definition["nodes"]["think"]["tools"][0] = {
        "name": "lookup_order",
        "description": "An order's status and total",
        "parameters": {"type": "object", "required": ["order"], "properties": {"order": {"type": "string"}}},
        "mcp": {"server": "orders", "tool": "lookup"},
    }
    return definition


async def test_a_run_calls_an_mcp_tool_with_the_settings_headers_and_the_call_s_key(
    mcp_harness: Harness, chat: ChatServer, orders_server: OrdersServer
) -> None:
    orders_server.start()
    chat.reply(
        Reply(tool_calls=[("lookup_order", {"order": "A-1"}), ("lookup_order", {"order": "Z-9"})]),
        Reply(content=json.dumps({"reply": "A-1 was delivered"})),
    )
    run_id = await mcp_harness.start(parse_definition(looked_up_by_mcp()), TICKET)
    result = await asyncio.wait_for(mcp_harness.dsmo.result(run_id), 60)

    assert result.status is RunStatus.COMPLETED and result.path == ["think", "answer"]
    assert sorted(orders_server.lookups) == ["A-1", "Z-9"]
    results = {m["tool_call_id"]: m["content"] for m in chat.requests[1]["messages"] if m["role"] == "tool"}
    assert json.loads(results["call-1"]) == ORDERS["A-1"]
    assert results["call-2"].startswith("error: ") and "no order Z-9" in results["call-2"], results
    keys = {headers.get("idempotency-key") for headers in orders_server.headers}
    assert {f"tool:{run_id}:think:1", f"tool:{run_id}:think:2"} <= keys
    assert all(headers.get("x-orders-token") == "from-the-settings" for headers in orders_server.headers)
    calls = [e for e in await mcp_harness.dsmo.events(run_id) if e.type == "TOOL_CALLED"]
    assert sorted((e.data["mcp"], e.data["ok"]) for e in calls) == [("orders/lookup", False), ("orders/lookup", True)]


async def test_an_mcp_server_that_is_down_is_retried_until_it_is_back(
    mcp_harness: Harness, chat: ChatServer, orders_server: OrdersServer
) -> None:
    chat.reply(
        Reply(tool_calls=[("lookup_order", {"order": "A-1"})]),
        Reply(content=json.dumps({"reply": "A-1 was delivered"})),
    )
    patient = looked_up_by_mcp(retry={"maxAttempts": 20, "initialInterval": "200ms", "jitter": 0})
    run_id = await mcp_harness.start(parse_definition(patient), TICKET)
    # The server is down: wait until Temporal has retried the call at least once, then start it.
    deadline = time.monotonic() + 60
    while True:
        pending = (await mcp_harness.dsmo.run(run_id).describe()).raw_description.pending_activities
        if any(activity.activity_type.name == "run_tool" and activity.attempt >= 2 for activity in pending):
            break
        assert time.monotonic() < deadline, "the call was never retried"
        await asyncio.sleep(0.1)
    orders_server.start()
    result = await asyncio.wait_for(mcp_harness.dsmo.result(run_id), 60)

    assert result.status is RunStatus.COMPLETED and orders_server.lookups == ["A-1"]
    called = next(e for e in await mcp_harness.dsmo.events(run_id) if e.type == "TOOL_CALLED")
    assert called.data["ok"] and called.data["attempts"] >= 2, called.data


async def test_a_run_calls_a_tool_of_a_server_the_worker_starts_over_stdio(
    dsmo: DsmoClient, store: ArtifactStore, tmp_path: Path, chat: ChatServer
) -> None:
    log = tmp_path / "calls.jsonl"
    script = Path(__file__).resolve().parents[2] / "mcp_stdio_orders.py"
    command = f"stdio:{sys.executable} {script} {log}"
    queue = f"mcp-stdio-{uuid.uuid4().hex[:8]}"
    chat.reply(
        Reply(tool_calls=[("lookup_order", {"order": "A-1"})]), Reply(content=json.dumps({"reply": "delivered"}))
    )
    worker = build_worker(
        dsmo.temporal,
        task_queue=queue,
        store=store,
        channel=FileChannel(tmp_path / "outbox"),
        llm=LlmEndpoint(chat.url),
        mcp_servers={"orders": (command, {})},
    )
    async with worker:
        run_id = (await dsmo.start(parse_definition(looked_up_by_mcp()), TICKET, task_queue=queue)).run_id
        result = await asyncio.wait_for(dsmo.result(run_id), 60)

    assert result.status is RunStatus.COMPLETED and result.path == ["think", "answer"]
    told = [m["content"] for m in chat.requests[1]["messages"] if m["role"] == "tool"]
    assert [json.loads(content) for content in told] == [ORDERS["A-1"]]
    # The call's idempotency key travels in its _meta, as it does in the HTTP header.
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        {"order": "A-1", "key": f"tool:{run_id}:think:1"}
    ]


async def test_a_worker_lists_its_servers_tools_and_publishing_refuses_a_tool_none_lists(
    dsmo: DsmoClient, store: ArtifactStore, tmp_path: Path, chat: ChatServer, orders_server: OrdersServer
) -> None:
    orders_server.start()
    servers: dict[str, tuple[str, dict[str, str]]] = {
        "orders": (orders_server.url, {}),
        "down": ("http://127.0.0.1:9/mcp", {}),
    }
    assert await list_mcp_tools(servers) == {"orders": ["lookup"], "down": None}

    queue, identity = f"mcp-list-{uuid.uuid4().hex[:8]}", f"lister-{uuid.uuid4().hex[:6]}"
    worker = build_worker(
        dsmo.temporal, task_queue=queue, store=store, channel=FileChannel(tmp_path / "o"), identity=identity
    )
    async with worker:
        offer = describe(ProcessorRegistry(), ActionRegistry(), [])
        refreshing = await published(store, queue, identity, offer, servers)
        try:
            found = await until_value(  # the worker is listed as a poller, and its servers' tools are listed
                lambda: dsmo.definitions.catalog(queue),
                lambda found: found is not None and bool(found["mcpTools"]),
                "the worker's MCP tools in the catalog",
            )
            assert found is not None and [row["name"] for row in found["mcpTools"]] == ["orders/lookup"]

            unknown = looked_up_by_mcp()
            unknown["nodes"]["think"]["tools"][0]["mcp"]["tool"] = "lookup_everything"
            unknown["nodes"]["think"]["tools"].pop()  # the refund action: only the MCP tool is judged
            with pytest.raises(NotOffered, match=r"mcp tool orders/lookup_everything"):
                await dsmo.definitions.publish(parse_definition(unknown), task_queue=queue)
            unheard = looked_up_by_mcp()
            unheard["nodes"]["think"]["tools"][0]["mcp"]["server"] = "billing"
            unheard["nodes"]["think"]["tools"].pop()
            with pytest.raises(NotOffered, match=r"mcp tool billing/lookup \(no worker's DSMO_MCP_SERVERS names"):
                await dsmo.definitions.publish(parse_definition(unheard), task_queue=queue)
            # A server no worker could list yet is not judged: the tool may be there.
            later = looked_up_by_mcp()
            later["nodes"]["think"]["tools"][0]["mcp"] = {"server": "down", "tool": "anything"}
            later["nodes"]["think"]["tools"].pop()
            published_ok = await dsmo.definitions.publish(parse_definition(later), task_queue=queue)
            assert published_ok.unchecked == ""
        finally:
            refreshing.cancel()
