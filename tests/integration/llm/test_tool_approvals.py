"""A tool call that waits for a person: the support agent's refunds above 50 wait (kind
`approval`) until someone approves, edits or rejects them, through the client, the ingress or the
console; who decided is in the trail, the model reads what became of its call, and a replay asks
no one, no model and no tool."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, expect

from bench.llm_server import ChatServer, Reply
from dsmo.client.client_errors import EventNotAccepted
from dsmo.client.task_list import TaskFilter, task_page
from dsmo.server.api_keys import KeyStore
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.ingress_server import serving
from tests.integration.llm.support_agent import OrderService, support, tool_messages
from tests.polling import until_value
from tests.ui.test_console import CHROMIUM, Console, assert_labelled, browser, new_page, until_waiting  # noqa: F401

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
BROKEN = {"ticket": {"text": "The TV arrived broken", "order": "B-7"}}
LOOKUP_THEN_REFUND = (
    Reply(tool_calls=[("lookup_order", {"order": "B-7"})]),
    Reply(
        content="The order is 120.00 and arrived broken: a full refund.",
        tool_calls=[("refund", {"order": "B-7", "amount": 120})],
    ),
)


async def waiting_refund(harness: Harness, chat: ChatServer, *then: Reply, **start: Any) -> str:
    """A support run whose model looked B-7 up and asked to refund 120: waiting for a decision."""
    chat.reply(*LOOKUP_THEN_REFUND, *then)
    run_id = await harness.start(parse_definition(support(f"support-{uuid.uuid4().hex[:6]}")), BROKEN, **start)
    view = await harness.dsmo.run(run_id).wait_for_status({RunStatus.WAITING}, timeout=60)
    assert view.waiting_for == "approval", view
    return run_id


async def test_a_refund_above_the_limit_waits_and_an_approval_through_the_client_makes_it_once(
    tool_harness: Harness, chat: ChatServer, orders: OrderService
) -> None:
    done = Reply(content=json.dumps({"reply": "Refunded 120.00", "refunded": True}))
    run_id = await waiting_refund(tool_harness, chat, done)
    handle = tool_harness.dsmo.run(run_id)
    view = await handle.status()
    assert view.waiting_data is not None
    shown = {name: view.waiting_data[name] for name in ("tool", "callId", "call", "arguments", "visit", "reason")}
    assert shown == {
        "tool": "refund",
        "callId": "call-1",
        "call": "think.v2#1",
        "arguments": {"order": "B-7", "amount": 120},
        "visit": "think.v2",
        "reason": "The order is 120.00 and arrived broken: a full refund.",
    }
    assert orders.ledger == {} and len(chat.requests) == 2  # nothing is done while it waits
    # A person's task: the console's task list (and any program serving people's work) lists it.
    tasks = await until_value(  # visibility is written asynchronously
        lambda: task_page(tool_harness.dsmo.core, TaskFilter(kind="approval", run=run_id), datetime.now(UTC)),
        lambda tasks: tasks.total > 0,
        "the approval listed as a person's task",
    )
    assert [task.run_id for task in tasks.tasks] == [run_id]

    # A decision for another call (a page left open on an earlier turn's call-1) is refused.
    with pytest.raises(EventNotAccepted, match=r"TOOL_DECIDED.call: 'think#1' is not the call waiting"):
        await handle.decide("approve", by="ana", call="think#1", call_id="call-1")
    ack = await handle.decide("approve", by="ana", reason="broken on arrival", call="think.v2#1")
    assert ack.accepted
    result = await asyncio.wait_for(handle.result(), 60)

    assert result.status is RunStatus.COMPLETED and result.path == ["think", "answer"]
    assert list(orders.ledger.values()) == [{"order": "B-7", "amount": 120}]
    trail = await handle.events()
    decided = next(e for e in trail if e.type == "TOOL_DECIDED")
    assert {k: decided.data[k] for k in ("tool", "decision", "by", "reason", "visit")} == {
        "tool": "refund",
        "decision": "approve",
        "by": "ana",
        "reason": "broken on arrival",
        "visit": "think.v2",
    }
    called = [e for e in trail if e.type == "TOOL_CALLED" and e.data["tool"] == "refund"]
    assert [e.data.get("decision") for e in called] == ["approve"]
    assert result.variables["approval"]["by"] == "ana"

    # A replay asks no one, no model and no tool, and takes the same path.
    asked = len(chat.requests)
    report = await tool_harness.dsmo.replay(run_id, task_queue=tool_harness.task_queue)
    assert report.replay_path == ["think", "answer"] and report.problem is None, report
    assert len(chat.requests) == asked and len(orders.ledger) == 1 and orders.lookups == 1


async def test_only_calls_that_wait_count_toward_the_arguments_a_turn_carries_and_a_refused_one_is_shown_as_sent(
    tool_harness: Harness, chat: ChatServer, orders: OrderService
) -> None:
    small = json.dumps({"order": "A-1" + " " * 2100, "amount": 10})  # over 2 KiB, 10 needs no approval
    large = json.dumps({"order": "B-7" + " " * 2100, "amount": 120})  # over 2 KiB, and 120 would wait
    chat.reply(
        Reply(tool_calls=[("refund", small), ("refund", large)]),
        Reply(content=json.dumps({"reply": "Refunded 10.00; a person looks at the rest"})),
    )
    run_id = await tool_harness.start(parse_definition(support(f"support-{uuid.uuid4().hex[:6]}")), BROKEN)
    result = await asyncio.wait_for(tool_harness.dsmo.result(run_id), 60)

    # The call no one approves is made whatever its size; the one that would wait carries too much.
    assert result.path == ["think", "answer"], result.path
    assert [entry["amount"] for entry in orders.ledger.values()] == [10]
    trail = await tool_harness.dsmo.events(run_id)
    made_or_not = {e.data["index"]: e.type for e in trail if e.type.startswith("TOOL_")}
    assert made_or_not == {1: "TOOL_CALLED", 2: "TOOL_REFUSED"}, made_or_not
    made, refused = tool_messages(chat.requests[1])
    assert json.loads(made["content"]) == {"refunded": 10, "order": "A-1" + " " * 2100}
    assert refused["content"].startswith("error: the arguments are 2,128 bytes; the calls of one answer that wait")
    # The model reads the refused call's arguments as it sent them, not emptied.
    (answered,) = [m for m in chat.requests[1]["messages"] if m["role"] == "assistant"]
    shown = [call["function"]["arguments"] for call in answered["tool_calls"]]
    assert json.loads(shown[0]) == json.loads(small) and shown[1] == large


async def test_a_rejection_through_the_ingress_is_read_by_the_model_and_nothing_is_refunded(
    tool_harness: Harness, chat: ChatServer, orders: OrderService, tmp_path: Path
) -> None:
    done = Reply(content=json.dumps({"reply": "A person will look at your refund"}))
    run_id = await waiting_refund(tool_harness, chat, done)
    settings = tool_harness.settings.with_changes(ingress={"api_keys_file": str(tmp_path / "keys.json")})
    keys = KeyStore(settings.api_keys_path)
    reader, decider = keys.add("reader", ["read", "events:*"]), keys.add("lead", ["read", "events:TOOL_DECIDED"])
    with serving(settings) as url, httpx.Client(base_url=url, timeout=60) as http:

        def decide(key: str, data: dict[str, Any]) -> httpx.Response:
            body = {"type": "TOOL_DECIDED", "event_id": uuid.uuid4().hex, "data": data}
            return http.post(f"/executions/{run_id}/events", json=body, headers={"x-api-key": key})

        # A key for systems' events (`events:*`) is not a person's: it cannot decide.
        refused = await asyncio.to_thread(decide, reader, {"decision": "approve"})
        assert refused.status_code == 403 and "events:TOOL_DECIDED" in refused.text
        # Edited arguments are held to the tool's schema: the run takes no decision it cannot make.
        edited = {"decision": "edit", "arguments": {"order": "B-7", "amount": 900}}
        too_much = await asyncio.to_thread(decide, decider, edited)
        assert too_much.status_code == 409, too_much.text
        why = too_much.json()["error"]["message"]
        assert "TOOL_DECIDED.arguments: amount: 900 is greater than the maximum of 500" in why, why
        stale = await asyncio.to_thread(decide, decider, {"decision": "approve", "callId": "call-9"})
        assert stale.status_code == 409 and "'call-9' is not the call waiting" in stale.json()["error"]["message"]
        rejected = await asyncio.to_thread(
            decide, decider, {"decision": "reject", "reason": "refunds of TVs need an inspection", "by": "Lena"}
        )
        assert rejected.status_code == 202, rejected.text
    result = await asyncio.wait_for(tool_harness.dsmo.result(run_id), 60)

    assert result.status is RunStatus.COMPLETED and orders.ledger == {}
    told = tool_messages(chat.requests[-1])[-1]["content"]
    assert told == "error: a person (lead (Lena)) rejected this call: refunds of TVs need an inspection", told
    decided = [e for e in await tool_harness.dsmo.events(run_id) if e.type == "TOOL_DECIDED"]
    assert [(e.data["decision"], e.data["by"]) for e in decided] == [("reject", "lead (Lena)")]


async def test_no_decision_in_time_rejects_the_call_and_the_model_is_told(
    tool_harness: Harness, chat: ChatServer, orders: OrderService
) -> None:
    chat.reply(*LOOKUP_THEN_REFUND, Reply(content=json.dumps({"reply": "A person will call you"})))
    hurried = support(f"support-{uuid.uuid4().hex[:6]}", approval={"timeout": "1s"})
    run_id = await tool_harness.start(parse_definition(hurried), BROKEN)
    result = await asyncio.wait_for(tool_harness.dsmo.result(run_id), 60)

    assert result.status is RunStatus.COMPLETED and orders.ledger == {}
    told = tool_messages(chat.requests[-1])[-1]["content"]
    assert told == "error: no one decided within 1s; the call was not made", told
    decided = next(e for e in await tool_harness.dsmo.events(run_id) if e.type == "TOOL_DECIDED")
    assert decided.data["decision"] == "reject" and decided.data["by"] is None


async def test_a_run_that_continues_as_new_while_it_waits_keeps_its_conversation(
    tool_harness: Harness, chat: ChatServer, orders: OrderService
) -> None:
    done = Reply(content=json.dumps({"reply": "Refunded 120.00", "refunded": True}))
    # A history limit this low carries the run into a new Temporal run as soon as it waits.
    run_id = await waiting_refund(tool_harness, chat, done, history_limit=20)
    trail = await until_value(  # the hand-over is asynchronous
        lambda: tool_harness.dsmo.events(run_id),
        lambda trail: any(e.type == "RUN_CONTINUED" for e in trail),
        "the run continued as new",
    )
    assert [e.type for e in trail if e.type in ("RUN_WAITING", "RUN_CONTINUED")] == ["RUN_WAITING", "RUN_CONTINUED"]
    await tool_harness.dsmo.run(run_id).decide("approve", by="ana")
    result = await asyncio.wait_for(tool_harness.dsmo.result(run_id), 60)

    assert result.status is RunStatus.COMPLETED and list(orders.ledger.values()) == [{"order": "B-7", "amount": 120}]
    # The last turn was asked with the whole conversation: both calls and both results.
    last = chat.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert json.loads(last[-1]["content"]) == {"refunded": 120, "order": "B-7"}
    assert len(chat.requests) == 3 and orders.lookups == 1


@pytest.fixture
def deciding_console(tool_harness: Harness, tmp_path: Path) -> Iterator[Console]:
    settings = tool_harness.settings.with_changes(
        temporal={"task_queue": tool_harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    keys = {"lead": KeyStore(settings.api_keys_path).add("lead", ["read", "events:TOOL_DECIDED"])}
    with serving(settings) as url:
        yield Console(url, keys, tmp_path, tool_harness.store)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make ui-check)")
async def test_a_person_edits_the_amount_in_the_console_and_the_smaller_refund_is_made(
    deciding_console: Console,
    tool_harness: Harness,
    chat: ChatServer,
    orders: OrderService,
    browser: Browser,  # noqa: F811 - the fixture
) -> None:
    run_id = await waiting_refund(tool_harness, chat, Reply(content=json.dumps({"reply": "Refunded 60.00"})))
    page = await new_page(browser)
    await deciding_console.sign_in(page, "lead", then=f"/console/runs/{run_id}")
    await expect(page.get_by_role("heading", name="Waiting for approval")).to_be_visible()
    await assert_labelled(page)
    arguments = page.get_by_label("Arguments")
    assert json.loads(await arguments.input_value()) == {"order": "B-7", "amount": 120}
    await arguments.fill("{not json")
    await page.get_by_role("button", name="Edit and approve").click()
    await expect(page.locator("#f-arguments-error")).to_have_text("not JSON: write the arguments as a JSON object")
    await arguments.fill(json.dumps({"order": "B-7", "amount": 60}))
    await page.get_by_label("Reason").fill("half: the stand was fine")
    await page.get_by_role("button", name="Edit and approve").click()
    await expect(page.get_by_role("status")).to_contain_text("Delivered")
    result = await asyncio.wait_for(tool_harness.dsmo.result(run_id), 60)

    assert result.status is RunStatus.COMPLETED and list(orders.ledger.values()) == [{"order": "B-7", "amount": 60}]
    trail = await tool_harness.dsmo.events(run_id)
    decided = next(e for e in trail if e.type == "TOOL_DECIDED")
    assert (decided.data["decision"], decided.data["by"], decided.data["arguments"]) == (
        "edit",
        "console:lead",
        {"order": "B-7", "amount": 60},
    )
    refund = next(e for e in trail if e.type == "TOOL_CALLED" and e.data["tool"] == "refund")
    record = tool_harness.store.read_json(refund.artifact_uris[0])
    assert record["arguments"] == {"order": "B-7", "amount": 60}
    assert record["proposedArguments"] == {"order": "B-7", "amount": 120}
    told = tool_messages(chat.requests[-1])[-1]["content"]
    assert told.startswith('(a person changed the arguments to {"amount": 60, "order": "B-7"})'), told
    await until_waiting_gone(page)


async def until_waiting_gone(page: Any) -> None:
    """The run page, reloaded, no longer shows a task once the run has ended."""
    await page.reload()
    await expect(page.get_by_role("heading", name="Waiting for approval")).to_have_count(0)


async def test_a_person_decides_from_the_command_line(
    tool_harness: Harness, chat: ChatServer, orders: OrderService
) -> None:
    run_id = await waiting_refund(tool_harness, chat, Reply(content=json.dumps({"reply": "Refunded 60.00"})))

    def dsmo(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(BIN / "dsmo"), "decide", run_id, *args]
        env = tool_harness.cli_env()
        return subprocess.run(command, check=False, capture_output=True, text=True, env=env, timeout=60)

    bad = await asyncio.to_thread(dsmo, "edit", "--arguments", "{amount: 60")
    assert bad.returncode != 0 and bad.stderr.strip().splitlines()[-1].startswith("error: --arguments: not valid JSON")
    assert "Traceback" not in bad.stderr
    edited = await asyncio.to_thread(
        dsmo, "edit", "--arguments", '{"order": "B-7", "amount": 60}', "--by", "ana", "--call", "think.v2#1"
    )
    assert edited.returncode == 0 and edited.stdout.startswith("delivered: TOOL_DECIDED"), edited
    result = await asyncio.wait_for(tool_harness.dsmo.result(run_id), 60)
    assert result.status is RunStatus.COMPLETED and list(orders.ledger.values()) == [{"order": "B-7", "amount": 60}]
    assert result.variables["approval"]["by"] == "ana"
