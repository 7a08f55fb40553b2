"""What the `llm` tests share: a local chat-completions server, scripted by each test, and a worker
whose tools call an order service."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bench.llm_server import ChatServer
from dsmo.activities.actions import ActionRegistry, FunctionAction
from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.llm_stage import LlmEndpoint
from dsmo.activities.messaging import FileChannel
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.worker import build_worker
from tests.conftest import Harness
from tests.integration.llm.support_agent import OrderService


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    """A running chat server with no script: each test queues the replies it needs."""
    server = ChatServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def orders() -> OrderService:
    """The order service the support agent's tools call: lookups, and a ledger of refunds."""
    return OrderService()


@pytest_asyncio.fixture
async def tool_harness(
    dsmo: DsmoClient,
    store: ArtifactStore,
    tmp_path: Path,
    stack_settings: Settings,
    chat: ChatServer,
    orders: OrderService,
) -> AsyncIterator[Harness]:
    """A worker on its own task queue whose tools are the order service's (and a 100 MiB export)."""
    actions = ActionRegistry()
    actions.add(FunctionAction("lookup-order", orders.lookup))
    actions.add(FunctionAction("refund-order", orders.refund))
    actions.add(FunctionAction("export-everything", lambda data, ctx: {"rows": "x" * (100 << 20)}))  # 100 MiB
    actions.add(FunctionAction("ship-order", _down))  # a service that is down: every attempt fails
    task_queue = f"tools-{uuid.uuid4().hex[:10]}"
    worker = build_worker(
        dsmo.temporal,
        task_queue=task_queue,
        store=store,
        channel=FileChannel(tmp_path / "outbox"),
        actions=actions,
        llm=LlmEndpoint(chat.url, default_model="local-default"),
    )
    async with worker:
        harness = Harness(dsmo, store, task_queue, tmp_path / "outbox", stack_settings)
        yield harness
    await harness.replay_all()


def _down(data: dict[str, Any], ctx: Any) -> dict[str, Any]:
    raise ConnectionError("the shipping service is down")
