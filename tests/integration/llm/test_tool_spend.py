"""What a run's model calls spend: tokens and cost (at the worker's price table) summed per run,
a run budget that stops it after the call that crosses it (repairs of an invalid answer
included), `run.usage` in a condition, the status and the console's line, and OpenTelemetry's
GenAI token metric."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
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
from dsmo.client.client_errors import EventMalformed, EventNotAccepted
from dsmo.client.connection import connect_temporal
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.monitoring import RunSummary
from dsmo.client.run_status import spend_line
from dsmo.runtime.telemetry import metrics_runtime
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.integration.llm.support_agent import TICKET, OrderService, support
from tests.polling import until, until_value
from tests.stack import free_port_block

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
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

    # `dsmo runs list` shows the spend from visibility, as of the run's end.
    async def listed() -> RunSummary:
        (row,) = [row async for row in harness.dsmo.runs(f"WorkflowId = '{run_id}'")]
        return row

    # Visibility is written after the run ends.
    row = await until_value(listed, lambda row: row.llm_tokens is not None, "visibility lists the run's spend")
    assert (row.llm_tokens, row.llm_cost_usd) == (800, 1.0)

    # The tokens and the cost, as OpenTelemetry's GenAI conventions name them, on the worker's metrics.
    wanted = ["gen_ai_client_token_usage", 'gen_ai_token_type="input"', "dsmo_llm_cost_usd", MODEL]

    async def reported() -> bool:  # the worker reports its metrics with its tasks
        body = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
        )
        return all(name in body for name in wanted)

    await until(reported, f"the worker's metrics show {wanted}")


async def test_a_replay_counts_the_budget_it_replays_but_shows_no_spend_of_its_own(
    priced_worker: tuple[Harness, int], chat: ChatServer
) -> None:
    harness, _ = priced_worker
    chat.reply(priced(calls=[("lookup_order", {"order": "A-1"})]), priced(content=json.dumps({"reply": "done"})))
    run_id = await harness.start(parse_definition(support(f"support-{uuid.uuid4().hex[:6]}")), TICKET)
    assert (await asyncio.wait_for(harness.dsmo.result(run_id), 60)).status is RunStatus.COMPLETED
    asked = len(chat.requests)
    report = await harness.dsmo.replay(run_id, task_queue=harness.task_queue)
    assert report.same_path and len(chat.requests) == asked  # answered from the record: no call

    async def listed(which: str) -> RunSummary:
        (row,) = [row async for row in harness.dsmo.runs(f"WorkflowId = '{which}'")]
        return row

    original = await until_value(lambda: listed(run_id), lambda row: row.llm_tokens is not None, "the spend listed")
    assert (original.llm_tokens, original.llm_cost_usd) == (800, 1.0)
    replayed = await until_value(
        lambda: listed(report.replay), lambda row: row.closed_at is not None, "the replay listed as ended"
    )
    assert (replayed.llm_tokens, replayed.llm_cost_usd) == (None, None)  # counted once, by the run that paid
    seen = (await harness.dsmo.run(report.replay).status()).usage
    assert seen is not None and seen["tokens"] == 800  # its budgets saw it all


async def test_run_usage_is_readable_in_a_condition(priced_worker: tuple[Harness, int], chat: ChatServer) -> None:
    harness, _ = priced_worker
    chat.reply(priced(content=json.dumps({"reply": "done"})))
    careful = support(f"support-{uuid.uuid4().hex[:6]}")
    careful["nodes"]["think"]["transitions"] = [{"when": "run.usage.costUsd > 0.4", "to": "person"}, {"to": "answer"}]
    run_id = await harness.start(parse_definition(careful), TICKET)
    result = await asyncio.wait_for(harness.dsmo.result(run_id), 60)
    assert result.path == ["think", "person"], result.path


async def test_a_spent_budget_waits_for_a_person_who_raises_it_and_the_run_goes_on(
    priced_worker: tuple[Harness, int], chat: ChatServer
) -> None:
    harness, _ = priced_worker
    looking = priced(calls=[("lookup_order", {"order": "A-1"})])
    chat.reply(looking, looking, priced(content=json.dumps({"reply": "on its way"})))
    asking = {"tokens": 700, "ask": {"timeout": "1d"}}
    spender = support(f"support-{uuid.uuid4().hex[:6]}") | {"budget": asking, "onBudget": "person"}
    # A history limit this low carries the run into a new Temporal run as soon as it waits.
    run_id = await harness.start(parse_definition(spender), TICKET, history_limit=20)
    handle = harness.dsmo.run(run_id)
    view = await handle.wait_for_status({RunStatus.WAITING}, timeout=60)
    await until(lambda: _continued(harness, run_id), "the run continued as new")  # the hand-over is asynchronous

    # Two calls, 800 tokens: the third waits for a person, who sees why and what was spent.
    assert view.waiting_for == "budget" and len(chat.requests) == 2, view
    assert view.waiting_data is not None
    assert {name: view.waiting_data[name] for name in ("budget", "reason", "limits")} == {
        "budget": "run",
        "reason": "800 tokens used of a budget of 700",
        "limits": {"tokens": 700},
    }
    # A limit already spent would stop the run again at once: refused, naming the field.
    with pytest.raises(EventNotAccepted, match=r"BUDGET_DECIDED.tokens: 800 is not above what was spent \(800\)"):
        await handle.decide_budget("raise", tokens=800)
    with pytest.raises(EventMalformed, match="give tokens, costUsd or modelCalls with decision raise"):
        await handle.decide_budget("raise")
    await handle.decide_budget("raise", tokens=2000, by="ana", reason="a long ticket")
    result = await asyncio.wait_for(harness.dsmo.result(run_id), 60)

    assert result.path == ["think", "answer"] and len(chat.requests) == 3, (result.path, len(chat.requests))
    trail = await harness.dsmo.events(run_id)
    decided = next(e for e in trail if e.type == "BUDGET_DECIDED")
    assert decided.data == {
        "budget": "run",
        "decision": "raise",
        "by": "ana",
        "limits": {"tokens": 2000},
        "reason": "a long ticket",
    }
    assert (await handle.status()).usage["tokens"] == 1200  # type: ignore[index]
    # The visit went on where it was, across the hand-over: the third turn read both earlier ones.
    roles = ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert [m["role"] for m in chat.requests[-1]["messages"]] == roles
    assert any(e.type == "RUN_CONTINUED" for e in trail)


async def test_a_person_who_stops_a_spent_budget_from_the_command_line_sends_the_run_on_budget(
    priced_worker: tuple[Harness, int], chat: ChatServer
) -> None:
    harness, _ = priced_worker
    looking = priced(calls=[("lookup_order", {"order": "A-1"})])
    chat.reply(looking, looking)
    # A tool-using visit's own budget waits as the run's does.
    run_id = await harness.start(
        parse_definition(
            support(
                f"support-{uuid.uuid4().hex[:6]}",
                budget={"modelCalls": 2, "ask": {"timeout": "1h"}},
                onBudget="person",
            )
        ),
        TICKET,
    )
    view = await harness.dsmo.run(run_id).wait_for_status({RunStatus.WAITING}, timeout=60)
    assert (view.waiting_for, view.waiting_data["budget"]) == ("budget", "node"), view  # type: ignore[index]

    def dsmo(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(BIN / "dsmo"), "decide", run_id, *args]
        return subprocess.run(command, check=False, capture_output=True, text=True, env=harness.cli_env(), timeout=60)

    mixed = await asyncio.to_thread(dsmo, "stop", "--call", "think#1")
    assert mixed.returncode != 0 and "--call decide a tool call, not a budget" in mixed.stderr, mixed
    stopped = await asyncio.to_thread(dsmo, "stop", "--by", "lena", "--reason", "enough")
    assert stopped.returncode == 0 and stopped.stdout.startswith("delivered: BUDGET_DECIDED"), stopped
    result = await asyncio.wait_for(harness.dsmo.result(run_id), 60)
    assert result.path == ["think", "person"] and len(chat.requests) == 2, result.path
    decided = next(e for e in await harness.dsmo.events(run_id) if e.type == "BUDGET_DECIDED")
    assert (decided.data["budget"], decided.data["decision"], decided.data["by"]) == ("node", "stop", "lena")


async def _continued(harness: Harness, run_id: str) -> bool:
    return any(e.type == "RUN_CONTINUED" for e in await harness.dsmo.events(run_id))


INVALID = Reply(content=json.dumps({"nope": 1}))  # breaks the support agent's outputSchema


@pytest.mark.parametrize("tools", [True, False], ids=["tools", "no-tools"])
async def test_a_run_budget_stops_the_repairs_of_an_invalid_answer_after_the_call_that_crosses_it(
    tool_harness: Harness, chat: ChatServer, tools: bool
) -> None:
    chat.reply(*[INVALID] * 5, Reply(content=json.dumps({"reply": "fixed"})))
    spender = support(f"support-{uuid.uuid4().hex[:6]}", retries=5) | {
        "budget": {"modelCalls": 1},
        "onBudget": "person",
    }
    if not tools:  # a plain `llm` node: one visit, its repairs within the same stage
        for field in ("tools", "maxTurns"):
            del spender["nodes"]["think"][field]
    run_id = await tool_harness.start(parse_definition(spender), TICKET)
    result = await asyncio.wait_for(tool_harness.dsmo.result(run_id), 60)

    # One call spends the budget: its invalid answer is not sent back, and the run goes onBudget.
    assert result.path == ["think", "person"] and len(chat.requests) == 1, (result.path, len(chat.requests))
    trail = await tool_harness.dsmo.events(run_id)
    spent = next(e for e in trail if e.type == "BUDGET_SPENT")
    assert (spent.data["budget"], spent.data["to"], spent.data["modelCalls"]) == ("run", "person", 1)
    assert spent.data["reason"] == "1 model calls made of a budget of 1"
    assert (await tool_harness.dsmo.run(run_id).status()).usage["modelCalls"] == 1  # type: ignore[index]


async def test_a_visit_budget_stops_the_repairs_of_an_invalid_answer_after_the_call_that_crosses_it(
    tool_harness: Harness, chat: ChatServer
) -> None:
    chat.reply(
        Reply(tool_calls=[("lookup_order", {"order": "A-1"})]), INVALID, Reply(content=json.dumps({"reply": "x"}))
    )
    visit = support(f"support-{uuid.uuid4().hex[:6]}", budget={"modelCalls": 2}, onBudget="person")
    run_id = await tool_harness.start(parse_definition(visit), TICKET)
    result = await asyncio.wait_for(tool_harness.dsmo.result(run_id), 60)

    assert result.path == ["think", "person"] and len(chat.requests) == 2, (result.path, len(chat.requests))
    spent = next(e for e in await tool_harness.dsmo.events(run_id) if e.type == "BUDGET_SPENT")
    assert (spent.data["budget"], spent.data["reason"]) == ("node", "2 model calls made of a budget of 2")


async def test_a_person_who_raises_a_budget_that_stopped_the_repairs_has_the_model_asked_again(
    tool_harness: Harness, chat: ChatServer
) -> None:
    chat.reply(INVALID, Reply(content=json.dumps({"reply": "on its way"})))
    asking = support(f"support-{uuid.uuid4().hex[:6]}", retries=3) | {
        "budget": {"modelCalls": 1, "ask": {"timeout": "1h"}},
        "onBudget": "person",
    }
    run_id = await tool_harness.start(parse_definition(asking), TICKET)
    handle = tool_harness.dsmo.run(run_id)
    view = await handle.wait_for_status({RunStatus.WAITING}, timeout=60)
    assert view.waiting_for == "budget" and len(chat.requests) == 1, view
    await handle.decide_budget("raise", model_calls=5, by="ana")
    result = await asyncio.wait_for(tool_harness.dsmo.result(run_id), 60)

    # The model is asked again in the visit's next turn, which answers.
    assert result.path == ["think", "answer"] and len(chat.requests) == 2, (result.path, len(chat.requests))
    assert (await handle.status()).usage["modelCalls"] == 2  # type: ignore[index]
