"""A tool-using `llm` node against a local chat server that speaks `tools`/`tool_calls`: the model
proposes calls, the run checks and makes them (once per key), records each, asks again with the
conversation, and stops at an answer; refusals go back to the model; the graph bounds the loop;
a replay asks the model nothing and calls no tool."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.llm_server import ChatServer, Reply
from dsmo.server.api_keys import KeyStore
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.console_session import sign_in, text_of
from tests.ingress_server import serving
from tests.integration.llm.support_agent import ORDERS, OrderService, run, support, tool_messages
from tests.polling import until

pytestmark = pytest.mark.integration


async def test_the_model_looks_up_refunds_and_answers_each_call_made_once_and_recorded(
    tool_harness: Harness, chat: ChatServer, orders: OrderService, tmp_path: Path
) -> None:
    chat.reply(
        Reply(tool_calls=[("lookup_order", {"order": "A-1"})]),
        Reply(tool_calls=[("refund", {"order": "A-1", "amount": 42.5})]),
        Reply(content=json.dumps({"reply": "Refunded 42.50 for A-1", "refunded": True})),
    )
    run_id, result = await run(tool_harness, support(f"support-{uuid.uuid4().hex[:6]}"))

    assert result.status is RunStatus.COMPLETED and result.path == ["think", "answer"]
    assert result.variables["stages"]["think"]["summary"] == {"reply": "Refunded 42.50 for A-1", "refunded": True}
    assert len(chat.requests) == 3
    first, second, third = chat.requests
    assert [tool["function"]["name"] for tool in first["tools"]] == ["lookup_order", "refund"]
    assert tool_messages(first) == []
    # Each turn is asked with the conversation so far: the model's calls, then their results by id.
    looked_up = tool_messages(second)
    assert [m["tool_call_id"] for m in looked_up] == ["call-1"] and json.loads(looked_up[0]["content"]) == ORDERS["A-1"]
    assert [m["role"] for m in third["messages"]] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert json.loads(tool_messages(third)[1]["content"]) == {"refunded": 42.5, "order": "A-1"}
    assert orders.lookups == 1 and list(orders.ledger.values()) == [{"order": "A-1", "amount": 42.5}]

    trail = await tool_harness.dsmo.events(run_id)
    calls = [e for e in trail if e.type == "TOOL_CALLED"]
    assert [(e.data["tool"], e.data["visit"], e.data["ok"]) for e in calls] == [
        ("lookup_order", "think", True),
        ("refund", "think.v2", True),
    ]
    assert calls[1].data["idempotencyKey"] == f"tool:{run_id}:think.v2:1"
    record = tool_harness.store.read_json(calls[1].artifact_uris[0])
    assert record["arguments"] == {"order": "A-1", "amount": 42.5} and record["output"]["refunded"] == 42.5
    turns = [e for e in trail if e.type == "STAGE_SUCCEEDED" and e.stage == "think"]
    assert [e.data["summary"].get("turn") for e in turns] == ["tool_calls", "tool_calls", None]

    # The console's run page shows the conversation turn by turn: the calls, their arguments and results.
    settings = tool_harness.settings.with_changes(ingress={"api_keys_file": str(tmp_path / "keys.json")})
    key = KeyStore(settings.api_keys_path).add("person", ["read"])
    with serving(settings) as url, httpx.Client(base_url=url, timeout=60) as browser:
        await asyncio.to_thread(sign_in, browser, key)
        page = (await asyncio.to_thread(browser.get, f"/console/runs/{run_id}")).text
    shown = text_of(page.split('id="conversation-heading"', 1)[1].split("</section>", 1)[0])
    assert "think called lookup_order" in shown and '{"order": "A-1"} → {"order": "A-1", "status"' in shown, shown
    assert "think.v2 called refund" in shown and '"refunded": 42.5' in shown, shown
    assert 'think.v3 answered {"refunded": true, "reply": "Refunded 42.50 for A-1"}' in shown, shown

    # The replay asks the model nothing and calls no tool: the records answer, the path is the same.
    report = await tool_harness.dsmo.replay(run_id, task_queue=tool_harness.task_queue)
    assert report.replay_path == ["think", "answer"] and report.first_divergence is None, report
    assert len(chat.requests) == 3 and orders.lookups == 1 and len(orders.ledger) == 1
    replayed = [e for e in await tool_harness.dsmo.events(report.replay) if e.type == "TOOL_CALLED"]
    assert [e.data.get("recorded") for e in replayed] == [True, True]


async def test_a_call_the_run_cannot_make_goes_back_to_the_model_and_nothing_is_done(
    tool_harness: Harness, chat: ChatServer, orders: OrderService
) -> None:
    asked = '{"order":"A-1",  "amount": 9999}'  # as a model may space it
    chat.reply(
        Reply(tool_calls=[("delete_everything", {}), ("refund", asked)]),
        Reply(tool_calls=[("lookup_order", {"order": "Z-9"})]),
        Reply(content=json.dumps({"reply": "I cannot refund that, a person will look"})),
    )
    run_id, result = await run(tool_harness, support(f"support-{uuid.uuid4().hex[:6]}"))

    assert result.status is RunStatus.COMPLETED and result.path == ["think", "answer"]
    refused = tool_messages(chat.requests[1])
    assert refused[0]["content"].startswith("error: there is no tool 'delete_everything'")
    assert "amount" in refused[1]["content"] and "500" in refused[1]["content"], refused[1]
    # The model reads its refused calls as it made them, then why: the reason is about those arguments.
    (answered,) = [m for m in chat.requests[1]["messages"] if m["role"] == "assistant"]
    assert [call["function"]["arguments"] for call in answered["tool_calls"]] == ["{}", asked]
    # The action's own refusal is the call's result too.
    assert tool_messages(chat.requests[2])[-1]["content"] == "error: no order Z-9"
    assert orders.ledger == {} and orders.lookups == 1
    trail = await tool_harness.dsmo.events(run_id)
    assert [(e.type, e.data["tool"]) for e in trail if e.type.startswith("TOOL_")] == [
        ("TOOL_REFUSED", "delete_everything"),
        ("TOOL_REFUSED", "refund"),
        ("TOOL_CALLED", "lookup_order"),
    ]
    assert next(e for e in trail if e.type == "TOOL_CALLED").data["ok"] is False
    # The trail points at the answer, whose record keeps why each call was refused and what it asked.
    refused_at = next(e for e in trail if e.type == "TOOL_REFUSED").artifact_uris[0]
    kept = tool_harness.store.read_json(refused_at)["output"]["toolCalls"]
    assert "amount: is greater than the maximum 500" in kept[1]["problem"]
    assert json.loads(kept[1]["asked"])["amount"] == 9999


@pytest.mark.parametrize(
    ("think", "replies", "why"),
    [
        ({"maxTurns": 2}, [Reply(tool_calls=[("lookup_order", {"order": "A-1"})])] * 2, "maxTurns 2"),
        ({}, [Reply(tool_calls=[("lookup_order", {"order": "A-1"})] * 500)], "500 tool calls; at most 8"),
    ],
    ids=["turns", "calls"],
)
async def test_the_graph_bounds_the_loop_and_a_runaway_model_goes_to_the_fail_safe(
    tool_harness: Harness, chat: ChatServer, orders: OrderService, think: dict[str, Any], replies: list[Reply], why: str
) -> None:
    chat.reply(*replies)
    run_id, result = await run(tool_harness, support(f"support-{uuid.uuid4().hex[:6]}", **think))

    assert result.path == ["think", "person"], result.path
    violation = next(e for e in await tool_harness.dsmo.events(run_id) if e.type == "CONTRACT_VIOLATION")
    assert why in json.dumps(violation.data), violation.data
    assert len(chat.requests) == len(replies) and orders.ledger == {}


async def test_a_budget_stops_the_loop_after_the_call_that_crosses_it_and_usage_is_readable(
    tool_harness: Harness, chat: ChatServer, orders: OrderService
) -> None:
    looking = Reply(tool_calls=[("lookup_order", {"order": "A-1"})])
    chat.reply(looking, looking, looking)
    spender = support(f"support-{uuid.uuid4().hex[:6]}", budget={"modelCalls": 2}, onBudget="person")
    run_id, result = await run(tool_harness, spender)

    assert result.path == ["think", "person"] and len(chat.requests) == 2, (result.path, len(chat.requests))
    spent = next(e for e in await tool_harness.dsmo.events(run_id) if e.type == "BUDGET_SPENT")
    assert spent.data["reason"] == "2 model calls made of a budget of 2" and spent.data["to"] == "person"
    usage = result.variables["stages"]["think"]["usage"]
    assert usage["modelCalls"] == 2 and usage["tokens"] > 0 and usage["tokens"] == spent.data["tokens"]

    # The usage is a variable like any other: a transition reads it.
    chat.reply(looking, Reply(content=json.dumps({"reply": "done"})))
    reading = support(f"support-{uuid.uuid4().hex[:6]}")
    reading["nodes"]["think"]["transitions"] = [
        {"when": "stages.think.usage.modelCalls >= 2", "to": "person"},
        {"to": "answer"},
    ]
    _, read = await run(tool_harness, reading)
    assert read.path == ["think", "person"], read.path


RECORDED = 50  # looped runs the what-if replays


async def test_what_if_over_tool_runs_names_exactly_the_runs_a_changed_transition_reroutes(
    tool_harness: Harness, chat: ChatServer, orders: OrderService
) -> None:
    agent = f"support-{uuid.uuid4().hex[:6]}"
    recorded = support(agent)
    refunded: set[str] = set()
    for index in range(RECORDED):
        # Every run looks the order up; every third refunds it too before answering.
        refunds = index % 3 == 0
        chat.reply(
            Reply(tool_calls=[("lookup_order", {"order": "A-1"})]),
            *([Reply(tool_calls=[("refund", {"order": "A-1", "amount": 42.5})])] if refunds else []),
            Reply(content=json.dumps({"reply": "done", "refunded": refunds})),
        )
        run_id, result = await run(tool_harness, recorded)
        assert result.status is RunStatus.COMPLETED
        if refunds:
            refunded.add(run_id)
    query = f"AgentName = '{agent}'"

    async def all_listed() -> bool:  # visibility is written asynchronously
        return await tool_harness.dsmo.count_runs(query) == RECORDED

    await until(all_listed, f"visibility lists the {RECORDED} recorded runs")
    asked, effects = len(chat.requests), (orders.lookups, len(orders.ledger))

    # Version 2 sends refunded tickets to a person: one transition changed.
    candidate = support(agent)
    candidate["nodes"]["think"]["transitions"] = [
        {"when": "stages.think.summary.refunded == true", "to": "person"},
        {"to": "answer"},
    ]
    report = await tool_harness.dsmo.what_if(query, parse_definition(candidate), task_queue=tool_harness.task_queue)
    tool_harness.started.extend(run.replay_id for run in report.runs)
    summary = report.summary()
    assert (summary["runs"], summary["errors"]) == (RECORDED, 0), report.to_json()
    assert {run.run_id for run in report.runs if not run.same_path} == refunded
    assert summary["byDivergence"] == {"after think: answer -> person": len(refunded)}
    assert (
        len(chat.requests) == asked and (orders.lookups, len(orders.ledger)) == effects
    )  # nothing asked, nothing done


async def test_what_if_judges_a_tighter_turn_limit_on_the_recorded_answers(
    tool_harness: Harness, chat: ChatServer, orders: OrderService
) -> None:
    agent = f"support-{uuid.uuid4().hex[:6]}"
    recorded = support(agent)
    # One run answers after a lookup (two model turns), one refunds first (three turns).
    chat.reply(Reply(tool_calls=[("lookup_order", {"order": "A-1"})]), Reply(content=json.dumps({"reply": "ok"})))
    short, _ = await run(tool_harness, recorded)
    chat.reply(
        Reply(tool_calls=[("lookup_order", {"order": "A-1"})]),
        Reply(tool_calls=[("refund", {"order": "A-1", "amount": 42.5})]),
        Reply(content=json.dumps({"reply": "refunded"})),
    )
    long, _ = await run(tool_harness, recorded)
    query = f"AgentName = '{agent}'"
    await until(lambda: _listed(tool_harness, query, 2), "visibility lists both recorded runs")
    asked, effects = len(chat.requests), (orders.lookups, len(orders.ledger))

    # Version 2 allows two model answers: only the run that needed three is cut short.
    report = await tool_harness.dsmo.what_if(
        query, parse_definition(support(agent, maxTurns=2)), task_queue=tool_harness.task_queue
    )
    tool_harness.started.extend(run.replay_id for run in report.runs)
    assert report.summary()["errors"] == 0, report.to_json()
    by_run = {run.run_id: run for run in report.runs}
    assert by_run[short].same_path and by_run[short].candidate_path == ["think", "answer"]
    assert not by_run[long].same_path and by_run[long].candidate_path == ["think", "person"]
    assert len(chat.requests) == asked and (orders.lookups, len(orders.ledger)) == effects


async def _listed(harness: Harness, query: str, count: int) -> bool:
    return await harness.dsmo.count_runs(query) == count


async def test_a_call_whose_action_fails_for_good_is_recorded_with_where_its_arguments_are(
    tool_harness: Harness, chat: ChatServer
) -> None:
    shipping = support(f"support-{uuid.uuid4().hex[:6]}", retry={"maxAttempts": 2, "initialInterval": "100ms"})
    shipping["nodes"]["think"]["tools"].append(
        {
            "name": "ship",
            "description": "Ship an order",
            "parameters": {"type": "object", "properties": {"order": {"type": "string"}}},
            "action": "ship-order",
        }
    )
    chat.reply(Reply(tool_calls=[("ship", {"order": "A-1"})]))
    run_id, result = await run(tool_harness, shipping)

    assert result.status is RunStatus.FAILED and "tool ship failed" in (result.error_message or "")
    called = next(e for e in await tool_harness.dsmo.events(run_id) if e.type == "TOOL_CALLED")
    assert called.data["ok"] is False and called.data["attempts"] == 2, called.data
    assert called.data["action"] == "ship-order" and called.data["idempotencyKey"] == f"tool:{run_id}:think:1"
    answer = tool_harness.store.read_bytes(called.artifact_uris[0])  # the turn's answer: the call's arguments
    assert b"ship" in answer and b"A-1" in answer


async def test_a_100_mib_tool_result_is_refused_recorded_small_and_the_model_is_told(
    tool_harness: Harness, chat: ChatServer
) -> None:
    exporting = support(f"support-{uuid.uuid4().hex[:6]}")
    exporting["nodes"]["think"]["tools"].append(
        {"name": "export", "description": "Everything, at once", "action": "export-everything"}
    )
    chat.reply(Reply(tool_calls=[("export", {})]), Reply(content=json.dumps({"reply": "too much"})))
    run_id, result = await run(tool_harness, exporting)

    assert result.status is RunStatus.COMPLETED and result.path == ["think", "answer"]
    told = tool_messages(chat.requests[1])[0]["content"]
    assert told.startswith("error: the result is 104,857,") and "at most 262,144" in told, told[:200]
    called = next(e for e in await tool_harness.dsmo.events(run_id) if e.type == "TOOL_CALLED")
    assert called.data["ok"] is False
    record = tool_harness.store.read_bytes(called.artifact_uris[0])
    assert len(record) < 4096 and b"xxxx" not in record  # the record keeps why, not the 100 MiB


async def test_a_replay_whose_model_asks_another_call_stops_and_makes_none(
    tool_harness: Harness, chat: ChatServer, orders: OrderService
) -> None:
    answer = Reply(content=json.dumps({"reply": "done"}))
    chat.reply(Reply(tool_calls=[("lookup_order", {"order": "A-1"})]), answer)
    run_id, _ = await run(tool_harness, support(f"support-{uuid.uuid4().hex[:6]}"))
    looked = orders.lookups

    # Asked again (--rerun-llm), the model wants another order: the record has no such call.
    chat.reply(Reply(tool_calls=[("lookup_order", {"order": "B-2"})]), answer)
    report = await tool_harness.dsmo.replay(run_id, task_queue=tool_harness.task_queue, rerun_llm=True)
    tool_harness.started.append(report.replay)
    assert report.problem is not None and "replay diverged: call 1 was lookup_order" in report.problem, report
    assert orders.lookups == looked  # the replay called nothing
