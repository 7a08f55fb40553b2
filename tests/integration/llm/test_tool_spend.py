"""What a run's model calls spend: tokens and cost (at the worker's price table) summed per run,
a run budget that stops it after the call that crosses it, `run.usage` in a condition, the
status and the console's line, and OpenTelemetry's GenAI token metric."""

from __future__ import annotations

import asyncio
import json
import urllib.request
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bench.llm_server import ChatServer, Reply
from dsmo.activities.actions import ActionRegistry, FunctionAction
from dsmo.activities.llm_stage import LlmEndpoint
from dsmo.activities.messaging import FileChannel
from dsmo.client.connection import connect_temporal
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.run_status import spend_line
from dsmo.runtime.telemetry import metrics_runtime
from dsmo.worker import build_worker
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.integration.llm.support_agent import TICKET, OrderService, support
from tests.stack import free_port_block

pytestmark = pytest.mark.integration

MODEL = "priced-model"
PRICES = {MODEL: (1000.0, 2000.0)}  # USD per million tokens: 300 in and 100 out cost 0.50


def priced(*, content: str | None = None, calls: list[tuple[str, dict[str, Any]]] | None = None) -> Reply:
    """An answer from the priced model that reports 300 prompt and 100 answer tokens."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"call-{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for n, (name, args) in enumerate(calls, 1)
        ]
    body = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:6]}",
        "object": "chat.completion",
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 300, "completion_tokens": 100, "total_tokens": 400},
    }
    return Reply(body=json.dumps(body))


@pytest_asyncio.fixture
async def priced_worker(
    harness: Harness, chat: ChatServer, orders: OrderService, tmp_path: Path
) -> AsyncIterator[tuple[Harness, int]]:
    """A worker with a price table, whose metrics Prometheus can read on the port it yields."""
    port = free_port_block(1)
    client = await connect_temporal(harness.settings, runtime=metrics_runtime(f"127.0.0.1:{port}"))
    actions = ActionRegistry()
    actions.add(FunctionAction("lookup-order", orders.lookup))
    actions.add(FunctionAction("refund-order", orders.refund))
    queue = f"spend-{uuid.uuid4().hex[:8]}"
    endpoint = LlmEndpoint(chat.url, default_model=MODEL, prices=PRICES)
    outbox = tmp_path / "out"
    worker = build_worker(
        client, task_queue=queue, store=harness.store, channel=FileChannel(outbox), actions=actions, llm=endpoint
    )
    async with worker:
        yield Harness(DsmoClient(client, harness.settings), harness.store, queue, outbox, harness.settings), port


@pytest.mark.parametrize(
    ("budget", "why"),
    [
        ({"costUsd": 0.9}, "1.0000 USD spent of a budget of 0.9000"),
        ({"tokens": 700}, "800 tokens used of a budget of 700"),
    ],
    ids=["cost", "tokens"],
)
async def test_a_run_budget_stops_it_after_the_call_that_crosses_it_and_its_spend_is_shown(
    priced_worker: tuple[Harness, int], chat: ChatServer, budget: dict[str, Any], why: str
) -> None:
    harness, port = priced_worker
    looking = priced(calls=[("lookup_order", {"order": "A-1"})])
    chat.reply(looking, looking, looking)
    spender = support(f"support-{uuid.uuid4().hex[:6]}") | {"budget": budget, "onBudget": "person"}
    run_id = await harness.start(parse_definition(spender), TICKET)
    result = await asyncio.wait_for(harness.dsmo.result(run_id), 60)

    # 0.50 USD and 400 tokens after the first call, 1.00 and 800 after the second: no third call.
    assert result.path == ["think", "person"] and len(chat.requests) == 2, (result.path, len(chat.requests))
    spent = next(e for e in await harness.dsmo.events(run_id) if e.type == "BUDGET_SPENT")
    assert (spent.data["budget"], spent.data["to"]) == ("run", "person")
    assert spent.data["reason"] == why
    usage = (await harness.dsmo.run(run_id).status()).usage
    assert usage == {"tokens": 800, "promptTokens": 600, "completionTokens": 200, "modelCalls": 2, "costUsd": 1.0}
    assert spend_line(usage) == "2 model calls, 800 tokens, 1.0000 USD"

    # The tokens and the cost, as OpenTelemetry's GenAI conventions name them, on the worker's metrics.
    wanted = ["gen_ai_client_token_usage", 'gen_ai_token_type="input"', "dsmo_llm_cost_usd", MODEL]
    for _ in range(300):  # the worker reports its metrics with its tasks (a hang guard)
        body = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
        )
        if all(name in body for name in wanted):
            break
        await asyncio.sleep(0.2)
    assert [name for name in wanted if name not in body] == []


async def test_run_usage_is_readable_in_a_condition(priced_worker: tuple[Harness, int], chat: ChatServer) -> None:
    harness, _ = priced_worker
    chat.reply(priced(content=json.dumps({"reply": "done"})))
    careful = support(f"support-{uuid.uuid4().hex[:6]}")
    careful["nodes"]["think"]["transitions"] = [{"when": "run.usage.costUsd > 0.4", "to": "person"}, {"to": "answer"}]
    run_id = await harness.start(parse_definition(careful), TICKET)
    result = await asyncio.wait_for(harness.dsmo.result(run_id), 60)
    assert result.path == ["think", "person"], result.path
