"""The graph narrows and bounds a tool loop: `allowedTools` offers a tool only while its condition
holds (refund only after a lookup), the visit's `turns` and `toolsCalled` are readable, and a
`loopTimeout` ends a loop that runs too long."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import pytest

from bench.llm_server import ChatServer, Reply
from dsmo.activities.actions import ActionContext, ActionRegistry, FunctionAction
from dsmo.activities.llm_stage import LlmEndpoint
from dsmo.activities.messaging import FileChannel
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.integration.llm.support_agent import TICKET, OrderService, run, support, tool_messages

pytestmark = pytest.mark.integration

AFTER_A_LOOKUP = {"refund": 'has(stages.think) && "lookup_order" in stages.think.toolsCalled'}


async def test_a_tool_is_offered_only_once_the_graph_allows_it(
    tool_harness: Harness, chat: ChatServer, orders: OrderService
) -> None:
    chat.reply(
        Reply(tool_calls=[("refund", {"order": "A-1", "amount": 42.5})]),  # not offered yet: refused
        Reply(tool_calls=[("lookup_order", {"order": "A-1"})]),
        Reply(tool_calls=[("refund", {"order": "A-1", "amount": 42.5})]),
        Reply(content=json.dumps({"reply": "Refunded 42.50"})),
    )
    careful = support(f"support-{uuid.uuid4().hex[:6]}", allowedTools=AFTER_A_LOOKUP)
    careful["nodes"]["think"]["transitions"] = [
        {"when": '"refund" in stages.think.toolsCalled && stages.think.turns == 4', "to": "answer"},
        {"to": "person"},
    ]
    run_id, result = await run(tool_harness, careful)

    assert result.status is RunStatus.COMPLETED and result.path == ["think", "answer"], result.path
    offered = [[tool["function"]["name"] for tool in request["tools"]] for request in chat.requests]
    assert offered == [["lookup_order"], ["lookup_order"], ["lookup_order", "refund"], ["lookup_order", "refund"]]
    assert tool_messages(chat.requests[1])[0]["content"].startswith("error: there is no tool 'refund'")
    assert list(orders.ledger.values()) == [{"order": "A-1", "amount": 42.5}]
    think = result.variables["stages"]["think"]
    assert (think["turns"], think["toolsCalled"]) == (4, ["lookup_order", "refund"])
    refused = [e.data["tool"] for e in await tool_harness.dsmo.events(run_id) if e.type == "TOOL_REFUSED"]
    assert refused == ["refund"]


async def test_a_loop_past_its_timeout_asks_the_model_no_more(
    harness: Harness, chat: ChatServer, orders: OrderService
) -> None:
    def slow_lookup(data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
        time.sleep(1.5)
        return orders.lookup(data, ctx)

    actions = ActionRegistry()
    actions.add(FunctionAction("lookup-order", slow_lookup))
    actions.add(FunctionAction("refund-order", orders.refund))
    queue = f"slow-tools-{uuid.uuid4().hex[:8]}"
    endpoint = LlmEndpoint(chat.url, default_model="local-default")
    channel = FileChannel(harness.outbox)
    async with build_worker(
        harness.dsmo.temporal, task_queue=queue, store=harness.store, channel=channel, actions=actions, llm=endpoint
    ):
        looking = Reply(tool_calls=[("lookup_order", {"order": "A-1"})])
        chat.reply(looking, looking)
        # A lookup takes 1.5 s: past a 1 s loop, the second turn is never asked.
        hurried = parse_definition(support(f"support-{uuid.uuid4().hex[:6]}", loopTimeout="1s"))
        run_id = (await harness.dsmo.start(hurried, TICKET, task_queue=queue)).run_id
        result = await asyncio.wait_for(harness.dsmo.result(run_id), 60)

    assert result.path == ["think", "person"] and len(chat.requests) == 1, (result.path, len(chat.requests))
    violation = next(e for e in await harness.dsmo.events(run_id) if e.type == "CONTRACT_VIOLATION")
    assert "past its loopTimeout 1s" in json.dumps(violation.data), violation.data
