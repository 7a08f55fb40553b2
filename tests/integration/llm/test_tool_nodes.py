"""Tools the graph's own nodes run: the model asks the customer (a `wait_for_response` node: the run
waits for the reply) and refunds (an `invoke` node: its compensation goes on the saga's stack). The
loop goes on after each, the conversation carries their outcomes, a later failure undoes the
refund, and a replay waits for no one, asks no model and applies nothing."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bench.llm_server import ChatServer, Reply
from dsmo.activities.actions import ActionContext, ActionRegistry, FunctionAction
from dsmo.activities.llm_stage import LlmEndpoint
from dsmo.activities.messaging import FileChannel
from dsmo.activities.plugin_errors import ActionRefused
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.integration.llm.support_agent import TICKET, OrderService, support, tool_messages
from tests.polling import until_value

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture
async def graph_tools(
    harness: Harness, chat: ChatServer, orders: OrderService, tmp_path: Path
) -> AsyncIterator[Harness]:
    """A worker whose refund can be undone (the ledger entry removed) and whose charge always fails."""

    def undo(output: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
        orders.ledger = {key: entry for key, entry in orders.ledger.items() if entry["order"] != output["order"]}
        return {"undone": output["order"]}

    def charge(data: dict[str, Any], ctx: ActionContext) -> None:
        raise ActionRefused("the card was declined")

    actions = ActionRegistry()
    actions.add(FunctionAction("lookup-order", orders.lookup))
    actions.add(FunctionAction("refund-order", orders.refund, undo))
    actions.add(FunctionAction("charge-fee", charge))
    queue = f"graph-tools-{uuid.uuid4().hex[:8]}"
    outbox = tmp_path / "graph-outbox"
    worker = build_worker(
        harness.dsmo.temporal,
        task_queue=queue,
        store=harness.store,
        channel=FileChannel(outbox),
        actions=actions,
        llm=LlmEndpoint(chat.url, default_model="local-default"),
    )
    async with worker:
        tools = Harness(harness.dsmo, harness.store, queue, outbox, harness.settings)
        yield tools
    await tools.replay_all()


def with_graph_tools(**think: Any) -> dict[str, Any]:
    """The support agent whose refund is an `invoke` node and who can ask the customer (a wait)."""
    definition = support(f"support-{uuid.uuid4().hex[:6]}", **think)
    tools = definition["nodes"]["think"]["tools"]
    tools[1] = {**{k: v for k, v in tools[1].items() if k not in ("action", "approval")}, "node": "refund_step"}
    tools.append(
        {
            "name": "ask_customer",
            "description": "Ask the customer a question and wait for the answer",
            "parameters": {"type": "object", "required": ["question"], "properties": {"question": {"type": "string"}}},
            "node": "ask",
        }
    )
    definition["nodes"]["refund_step"] = {
        "actionType": "invoke",
        "action": "refund-order",
        "input": {"order": "{{toolCall.arguments.order}}", "amount": "{{toolCall.arguments.amount}}"},
        "compensate": {},
    }
    definition["nodes"]["ask"] = {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}}
    return definition


SCRIPT = (
    Reply(tool_calls=[("ask_customer", {"question": "Which item arrived broken?"})]),
    Reply(tool_calls=[("refund", {"order": "A-1", "amount": 42.5})]),
    Reply(content=json.dumps({"reply": "Refunded 42.50 for the blender"})),
)


async def test_the_model_asks_the_customer_and_refunds_through_nodes_of_the_graph(
    graph_tools: Harness, chat: ChatServer, orders: OrderService
) -> None:
    chat.reply(*SCRIPT)
    run_id = await graph_tools.start(parse_definition(with_graph_tools()), TICKET)
    handle = graph_tools.dsmo.run(run_id)
    view = await handle.wait_for_status({RunStatus.WAITING}, timeout=60)
    assert (view.waiting_for, view.current_node) == ("response", "ask")
    assert orders.ledger == {}
    await handle.respond("the blender")
    result = await asyncio.wait_for(handle.result(), 60)

    assert result.status is RunStatus.COMPLETED and result.path == ["think", "answer"], result.path
    asked, refunded = (json.loads(tool_messages(request)[-1]["content"]) for request in chat.requests[1:3])
    assert asked["node"] == "ask" and asked["set"]["lastResponse"] == "the blender", asked
    assert refunded["output"] == {"refunded": 42.5, "order": "A-1"}, refunded
    assert list(orders.ledger.values()) == [{"order": "A-1", "amount": 42.5}]
    trail = await handle.events()
    called = [(e.data["tool"], e.data.get("node")) for e in trail if e.type == "TOOL_CALLED"]
    assert called == [("ask_customer", "ask"), ("refund", "refund_step")]
    assert any(e.type == "STAGE_SUCCEEDED" and e.stage == "refund_step" for e in trail)
    assert result.variables["toolCall"]["arguments"] == {"order": "A-1", "amount": 42.5}

    # The replay takes the reply from the record, asks no model and refunds nothing.
    asked_before = len(chat.requests)
    report = await graph_tools.dsmo.replay(run_id, task_queue=graph_tools.task_queue)
    graph_tools.started.append(report.replay)
    assert report.replay_path == ["think", "answer"] and report.problem is None, report
    assert len(chat.requests) == asked_before and len(orders.ledger) == 1


async def test_a_later_failure_undoes_the_refund_a_tool_made_through_the_graph(
    graph_tools: Harness, chat: ChatServer, orders: OrderService
) -> None:
    chat.reply(*SCRIPT[1:])
    failing = with_graph_tools()
    failing["nodes"]["think"]["transitions"] = [{"to": "fee"}]
    failing["nodes"]["fee"] = {"actionType": "invoke", "action": "charge-fee", "next": "answer"}
    run_id = await graph_tools.start(parse_definition(failing), TICKET)
    result = await asyncio.wait_for(graph_tools.dsmo.result(run_id), 60)

    assert result.status is RunStatus.FAILED, result
    assert orders.ledger == {}  # the refund the model made through refund_step was undone
    trail = await graph_tools.dsmo.events(run_id)
    assert [e.stage for e in trail if e.type == "COMPENSATION_SUCCEEDED"] == ["refund_step"]


async def test_a_run_that_continues_as_new_while_a_tool_node_waits_goes_on_with_the_same_call(
    graph_tools: Harness, chat: ChatServer, orders: OrderService
) -> None:
    chat.reply(Reply(tool_calls=[("lookup_order", {"order": "A-1"})]), *SCRIPT)
    # A history limit this low carries the run into a new Temporal run once it waits (after a
    # lookup turn, its history is past 20 events).
    run_id = await graph_tools.start(parse_definition(with_graph_tools()), TICKET, history_limit=20)
    handle = graph_tools.dsmo.run(run_id)
    trail = await until_value(  # the hand-over is asynchronous
        handle.events, lambda trail: any(e.type == "RUN_CONTINUED" for e in trail), "the run continued as new"
    )
    assert [e.type for e in trail if e.type in ("RUN_WAITING", "RUN_CONTINUED")] == ["RUN_WAITING", "RUN_CONTINUED"]
    view = await handle.wait_for_status({RunStatus.WAITING}, timeout=60)
    assert (view.waiting_for, view.current_node) == ("response", "ask"), view
    await handle.respond("the blender")
    result = await asyncio.wait_for(handle.result(), 60)

    assert result.status is RunStatus.COMPLETED and result.path[-1] == "answer", result.path
    assert len(chat.requests) == 4 and list(orders.ledger.values()) == [{"order": "A-1", "amount": 42.5}]
    asked = json.loads(tool_messages(chat.requests[2])[-1]["content"])
    assert asked["set"]["lastResponse"] == "the blender", asked
    # The last turn was asked with the whole conversation, across the hand-over.
    roles = [m["role"] for m in chat.requests[3]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool"], roles
