"""Tool-using `llm` nodes: what publishing checks of their tools, and the pure parts of a turn
(the answer's calls checked against the tools, the conversation sent back)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from dsmo.activities.catalog_publishing import with_mcp_tools
from dsmo.activities.contract_schemas import compile_schema
from dsmo.activities.json_values import json_problem
from dsmo.activities.llm_answers import cost_usd, judge
from dsmo.activities.llm_tools import (
    ARGUMENTS_MAX_BYTES,
    checked_calls,
    conversation_messages,
    tool_turn_output,
    turn_of,
    waits,
)
from dsmo.activities.plugin_errors import ContractViolation
from dsmo.client.agent_catalog import missing_from
from dsmo.client.definitions_client import mcp_tools_of, needs
from dsmo.config.env_values import SettingsError
from dsmo.config.llm_settings import LlmSettings
from dsmo.server.api_keys import ApiKey
from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.definition.model import parse_definition
from dsmo.workflows.definition.node_types import WAIT_TIMEOUTS
from dsmo.workflows.definition.tools import UNSPENT, add_spend, decision_problem
from dsmo.workflows.nodes.waits import TIMEOUT_SUMMARIES
from dsmo.workflows.run.spend import raise_problem

LOOKUP = {"type": "object", "required": ["order"], "properties": {"order": {"type": "string", "maxLength": 10}}}


def definition(*tools: dict[str, Any], **node: Any) -> Any:
    return parse_definition(
        {
            "agent": "tools-check",
            "start": "ask",
            "nodes": {"ask": {"actionType": "llm", "prompt": "Help", "tools": list(tools), **node}},
        }
    )


def tool(name: str = "lookup", **fields: Any) -> dict[str, Any]:
    return {"name": name, "description": "Look it up", "parameters": LOOKUP, "action": "lookup-order", **fields}


def test_a_node_with_tools_is_admitted_and_its_actions_are_what_workers_must_offer() -> None:
    admitted = definition(tool(), tool("refund", action="refund-order"), maxTurns=4)
    node = admitted.nodes["ask"]
    assert [t.name for t in node.tools] == ["lookup", "refund"] and node.max_turns == 4 and node.max_tool_calls == 8
    assert node.tools[0].offered()["function"]["parameters"] == LOOKUP
    assert needs(admitted) == (set(), {"lookup-order", "refund-order"})
    served = definition(tool(action=None, mcp={"server": "orders", "tool": "lookup"}))
    assert served.nodes["ask"].tools[0].mcp.tool == "lookup" and needs(served) == (set(), set())


@pytest.mark.parametrize(
    ("tools", "node", "field", "reason"),
    [
        ([tool(), tool()], {}, "nodes.ask.tools.1.name", "offered twice"),
        ([tool(name="no spaces")], {}, "nodes.ask.tools.0.name", "pattern"),
        ([tool(parameters={"type": "array"})], {}, "nodes.ask.tools.0.parameters.type", "object"),
        (
            [tool(parameters={"properties": {"x": {"type": "string", "pattern": "^(?!no)"}}})],
            {},
            "nodes.ask.tools.0.parameters.properties.x.pattern",
            "RE2",
        ),
        ([tool(parameters={"$ref": "#"})], {}, "nodes.ask.tools.0.parameters", "refers to itself"),
        ([tool()], {"maxTurns": 0}, "nodes.ask.maxTurns", "greater than or equal to 1"),
        ([tool()], {"maxToolCalls": 99}, "nodes.ask.maxToolCalls", "less than or equal to 32"),
        ([], {}, "nodes.ask.tools", "at least 1"),
        ([tool()], {"budget": {}}, "nodes.ask.budget", "give tokens, costUsd, modelCalls or some of them"),
        ([tool()], {"budget": {"tokens": 0}}, "nodes.ask.budget.tokens", "greater than or equal to 1"),
        ([tool()], {"onBudget": "nowhere"}, "nodes.ask.onBudget", "unknown node 'nowhere'"),
        ([tool(mcp={"server": "orders", "tool": "lookup"})], {}, "nodes.ask.tools.0", "give one of action"),
        ([tool(action=None)], {}, "nodes.ask.tools.0", "give one of action"),
        ([tool(action=None, mcp={"server": "Orders!", "tool": "x"})], {}, "nodes.ask.tools.0.mcp.server", "pattern"),
        ([tool(action=None, node="nowhere")], {}, "nodes.ask.tools.0.node", "'nowhere' is not a node of the graph"),
        ([tool(action=None, node="ask")], {}, "nodes.ask.tools.0.node", "'ask' is an llm node"),
        ([tool()], {"allowedTools": {"refund": "true"}}, "nodes.ask.allowedTools.refund", "not a tool of the node"),
        ([tool()], {"allowedTools": {"lookup": "nope.x"}}, "nodes.ask.allowedTools.lookup", "unknown field 'nope'"),
    ],
)
def test_bad_tools_are_refused_at_publish_naming_the_field(
    tools: list[dict[str, Any]], node: dict[str, Any], field: str, reason: str
) -> None:
    with pytest.raises(DefinitionError) as refused:
        definition(*tools, **node)
    assert field in str(refused.value) and reason in str(refused.value), str(refused.value)


SCHEMAS = {"lookup": compile_schema(LOOKUP)}


def call(name: str, arguments: Any, call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_each_call_is_checked_and_a_bad_one_is_refused_with_its_reason_not_raised() -> None:
    checked = checked_calls(
        [
            call("lookup", json.dumps({"order": "A-1"})),
            call("lookup", json.dumps({"order": "far too long an order id"}), "c2"),
            call("drop_tables", "{}", "c3"),
            call("lookup", "{not json", "c4"),
            call("lookup", "[1, 2]", "c5"),
            call("lookup", "x" * (ARGUMENTS_MAX_BYTES + 1), "c6"),
        ],
        SCHEMAS,  # type: ignore[arg-type]
        8,
    )
    assert checked[0] == {"id": "c1", "name": "lookup", "arguments": {"order": "A-1"}}
    problems = [entry.get("problem", "") for entry in checked[1:]]
    assert "order" in problems[0] and "long" in problems[0]
    assert problems[1] == "there is no tool 'drop_tables'; the tools are lookup"
    assert problems[2:] == [
        "the arguments are not JSON",
        "the arguments are not a JSON object",
        f"the arguments are {ARGUMENTS_MAX_BYTES + 1:,} bytes; at most {ARGUMENTS_MAX_BYTES:,}",
    ]
    assert all(entry["arguments"] == {} for entry in checked[1:])  # a refused call keeps no arguments


def test_an_answer_with_too_many_calls_is_a_contract_violation() -> None:
    with pytest.raises(ContractViolation, match=r"500 tool calls; at most 8 \(maxToolCalls\)"):
        checked_calls([call("lookup", "{}", f"c{n}") for n in range(500)], SCHEMAS, 8)  # type: ignore[arg-type]


def test_a_turn_is_read_from_the_reply_and_sent_back_as_the_conversation() -> None:
    body = json.dumps({"choices": [{"message": {"content": None, "tool_calls": [call("lookup", '{"order": "A-1"}')]}}]})
    content, calls, _ = turn_of(200, body, None)
    assert content is None and calls[0]["function"]["name"] == "lookup"
    text, none, _ = turn_of(200, json.dumps({"choices": [{"message": {"content": "done"}}]}), None)
    assert (text, none) == ("done", [])

    document, summary = tool_turn_output(None, checked_calls(calls, SCHEMAS, 8))  # type: ignore[arg-type]
    assert summary == {"turn": "tool_calls", "toolCalls": [{"id": "c1", "name": "lookup", "ok": True}]}
    refused = {"content": "checking", "toolCalls": [{"id": "c2", "name": "nope", "arguments": {}, "problem": "no"}]}
    messages = conversation_messages([(document, [{"output": {"status": "delivered"}}]), (refused, [None])])
    assert [m["role"] for m in messages] == ["assistant", "tool", "assistant", "tool"]
    assert messages[0]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"order": "A-1"}'}
    assert messages[1] == {"role": "tool", "tool_call_id": "c1", "content": '{"status": "delivered"}'}
    assert messages[3] == {"role": "tool", "tool_call_id": "c2", "content": "error: no"}


def test_a_budget_needs_tools_and_says_what_was_spent() -> None:
    with pytest.raises(DefinitionError, match=r"nodes\.ask\.budget: a budget bounds the turns of a node with tools"):
        parse_definition(
            {
                "agent": "x",
                "start": "ask",
                "nodes": {"ask": {"actionType": "llm", "prompt": "p", "budget": {"tokens": 9}}},
            }
        )
    budget = definition(tool(), budget={"tokens": 100, "modelCalls": 3, "costUsd": 0.5}).nodes["ask"].budget
    assert budget.spent({"tokens": 99, "modelCalls": 2, "costUsd": 0.49}) is None
    assert budget.spent({"tokens": 100, "modelCalls": 1}) == "100 tokens used of a budget of 100"
    assert budget.spent({"tokens": 5, "modelCalls": 3}) == "3 model calls made of a budget of 3"
    assert budget.spent({"costUsd": 0.5}) == "0.5000 USD spent of a budget of 0.5000"


def test_a_budget_that_asks_waits_a_day_by_default_and_a_raise_must_clear_what_was_spent() -> None:
    budget = definition(tool(), budget={"tokens": 700, "ask": {}}).nodes["ask"].budget
    assert budget.ask is not None and budget.ask.timeout == timedelta(days=1) and budget.ask.on_timeout == "continue"
    assert budget.raised({"tokens": 2000, "other": 1}).tokens == 2000
    waiting = {"usage": {"tokens": 800, "modelCalls": 2}, "limits": {"tokens": 700, "modelCalls": 5}}
    assert raise_problem(waiting, {"decision": "stop"}) is None
    assert raise_problem(waiting, {"decision": "raise", "tokens": 900}) is None
    assert raise_problem(waiting, {"decision": "raise", "tokens": 800}) == (
        "BUDGET_DECIDED.tokens: 800 is not above what was spent (800)"
    )
    assert raise_problem(waiting, {"decision": "raise", "modelCalls": 9}) == (
        "BUDGET_DECIDED: still spent (800 tokens used of a budget of 700); raise that limit too"
    )
    with pytest.raises(DefinitionError, match=r"nodes\.ask\.budget\.ask\.timeout: 40d is above the maximum of 30d"):
        definition(tool(), budget={"tokens": 7, "ask": {"timeout": "40d"}})


def test_spend_adds_each_visit_tokens_calls_and_cost_and_prices_come_from_settings() -> None:
    usage = dict(UNSPENT)
    add_spend(usage, {"usage": {"prompt_tokens": 300, "completion_tokens": 100, "total_tokens": 400}, "calls": 2})
    add_spend(usage, {"usage": {"total_tokens": 10}, "costUsd": 0.25})
    assert usage == {"tokens": 410, "promptTokens": 300, "completionTokens": 100, "modelCalls": 3, "costUsd": 0.25}
    assert cost_usd({"m": (1000.0, 2000.0)}, "m", {"prompt_tokens": 300, "completion_tokens": 100}) == 0.5
    assert cost_usd({"m": (1000.0, 2000.0)}, "other", {"prompt_tokens": 300}) is None
    priced = LlmSettings.from_env({"DSMO_LLM_PRICES": '{"m": {"input": 0.15, "output": 0.6}}'})
    assert priced.price_table == {"m": (0.15, 0.6)}
    with pytest.raises(SettingsError, match=r"DSMO_LLM_PRICES\.m: give input and output"):
        LlmSettings.from_env({"DSMO_LLM_PRICES": '{"m": {"input": -1, "output": 0.6}}'})


def test_an_approval_condition_reads_the_arguments_and_is_checked_at_publish() -> None:
    admitted = definition(tool(), tool("refund", approval="args.amount > 50"), approval={"timeout": "2h"})
    node = admitted.nodes["ask"]
    assert node.tools[1].approval == "args.amount > 50" and node.approval.timeout == timedelta(hours=2)
    with pytest.raises(DefinitionError, match=r"nodes\.ask\.tools\.0\.approval: refers to unknown field 'argz'"):
        definition(tool(approval="argz.amount > 50"))
    with pytest.raises(DefinitionError, match=r"nodes\.ask\.approval: it says how tool calls wait for a person"):
        parse_definition(
            {
                "agent": "x",
                "start": "ask",
                "nodes": {"ask": {"actionType": "llm", "prompt": "p", "approval": {"timeout": "1h"}}},
            }
        )


def test_calls_that_may_wait_carry_their_arguments_and_the_models_words_in_the_summary() -> None:
    calls = [
        {"id": "c1", "name": "lookup", "arguments": {"order": "A-1"}},
        {"id": "c2", "name": "refund", "arguments": {"order": "A-1", "amount": 80}},
    ]
    _, summary = tool_turn_output("Refunding: it broke", calls, ["refund"])
    assert summary["toolCalls"] == [
        {"id": "c1", "name": "lookup", "ok": True},
        {"id": "c2", "name": "refund", "ok": True, "arguments": {"order": "A-1", "amount": 80}},
    ]
    assert summary["reason"] == "Refunding: it broke"
    edited = {"output": {"refunded": 60}, "arguments": {"amount": 60}, "decision": {"decision": "edit"}}
    told = conversation_messages([({"toolCalls": calls[1:]}, [edited])])[1]["content"]
    assert told == '(a person changed the arguments to {"amount": 60}) {"refunded": 60}'


def test_a_catalog_names_the_mcp_tools_its_workers_listed_and_what_a_definition_lacks() -> None:
    offer = with_mcp_tools({"agents": [], "actions": []}, {"orders": ["lookup"], "down": None})
    named = {("orders", "lookup"), ("orders", "cancel"), ("down", "anything"), ("billing", "pay")}
    assert missing_from(offer, set(), set(), named) == [
        "mcp tool billing/pay (no worker's DSMO_MCP_SERVERS names its server)",
        "mcp tool orders/cancel",
    ]
    assert mcp_tools_of(definition(tool(action=None, mcp={"server": "orders", "tool": "lookup"}))) == {
        ("orders", "lookup")
    }


def test_calls_shown_to_the_run_carry_at_most_2_kib_of_arguments_the_rest_are_refused() -> None:
    calls = [{"id": f"c{n}", "name": "refund", "arguments": {"order": "A-1", "note": "x" * 900}} for n in range(1, 4)]
    document, summary = tool_turn_output("é" * 3000, calls, ["refund"])
    assert [entry["ok"] for entry in summary["toolCalls"]] == [True, True, False]
    assert document["toolCalls"][2]["problem"].startswith("the arguments are 925 bytes; the calls of one answer")
    assert len(json.dumps(summary).encode()) < 4096  # under the stage's summary cap, whatever the words


def test_only_calls_that_may_wait_count_toward_the_2_kib_and_a_refused_one_is_sent_back_as_asked() -> None:
    assert waits("args.amount > 50", {"amount": 80}) and not waits("args.amount > 50", {"amount": 10})
    assert waits("args.amount > 50 && run.usage.costUsd < 1", {"amount": 10})  # the run decides what it reads
    assert waits("args.nope > 1", {})  # the run cannot evaluate it either: a person decides
    calls = [
        {"id": f"c{n}", "name": "refund", "arguments": {"amount": amount, "note": "x" * 1500}}
        for n, amount in ((1, 10), (2, 80), (3, 90))
    ]
    sent = [json.dumps(call["arguments"], indent=1) for call in calls]  # as the model spaced them
    document, summary = tool_turn_output(None, calls, ["refund"], {"refund": "args.amount > 50"}, sent)
    assert [(entry["ok"], entry.get("waits"), "arguments" in entry) for entry in summary["toolCalls"]] == [
        (True, False, False),  # waits for no one: made without the run reading its arguments
        (True, None, True),
        (False, None, False),  # 1,500 bytes more than the two that wait may carry together
    ]
    told = conversation_messages([(document, [{"output": {}}, {"output": {}}, None])])
    assert told[0]["tool_calls"][2]["function"]["arguments"] == sent[2]
    assert told[3]["content"].startswith("error: the arguments are 1,523 bytes")


def test_a_decision_names_its_call_and_a_wildcard_key_cannot_decide() -> None:
    waiting = {"tool": "refund", "callId": "call-1", "call": "think.v2#1"}
    assert decision_problem([], waiting, {"decision": "approve", "call": "think.v2#1"}) is None
    stale = decision_problem([], waiting, {"decision": "approve", "call": "think#1"})
    assert stale is not None and stale.startswith("TOOL_DECIDED.call: 'think#1' is not the call waiting")
    webhook = ApiKey("hook", "h", "p", ["events:*"])
    assert webhook.allows("events:MESSAGE_RECEIVED") and not webhook.allows("events:TOOL_DECIDED")
    assert ApiKey("lead", "h", "p", ["events:TOOL_DECIDED"]).allows("events:TOOL_DECIDED")


def test_text_that_is_not_unicode_is_an_invalid_answer_or_a_refused_call_never_a_crash() -> None:
    unpaired = json.dumps({"choices": [{"message": {"content": "a\ud800b"}}]})
    content, _, problem, answer = judge(200, unpaired, None, None)
    assert problem is not None and problem.startswith("it is not valid Unicode") and answer == {}
    content.encode()  # what is sent back to be repaired is valid UTF-8
    arguments = json.dumps({"order": "A\udc00"})
    checked = checked_calls([call("lookup", arguments)], SCHEMAS, 8)  # type: ignore[arg-type]
    assert checked[0]["problem"] == "arguments.order: not valid Unicode (a lone surrogate)"
    keyed = json_problem({"k\ud800": {"deeper": "x"}}, what="output")
    assert keyed == "output (a key): not valid Unicode (a lone surrogate)"


def test_every_wait_kind_says_why_it_timed_out() -> None:
    # A timeout that ends the run names what it waited for; a kind without words would fail its task.
    assert set(WAIT_TIMEOUTS) <= set(TIMEOUT_SUMMARIES)
