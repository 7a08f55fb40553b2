"""Every action type's parameters, and the seed's timeout table (defaults and maxima) per kind."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.definition.model import parse_definition
from dsmo.workflows.definition.node_types import ACTION_TYPES, WAIT_TIMEOUTS

WAIT_ACTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "response": ("wait_for_response", {}),
    "agent": ("trigger_agent", {"agent": "child"}),
    "document": ("request_document", {"documents": ["id_card"]}),
    "signature": ("request_signature", {"document": "https://x/c.pdf"}),
    "test": ("assign_test", {"test": "t"}),
    "event": ("wait_for_event", {"event": "cal-1"}),
}
SEED_TABLE = {  # kind: (default, maximum) as the seed's "Configuracion de Timeout" table says
    "response": ("24h", "7d"),
    "agent": ("1h", "24h"),
    "document": ("7d", "30d"),
    "signature": ("7d", "30d"),
    "test": ("7d", "30d"),
}


def one(action: str, parameters: dict[str, Any]) -> Any:
    return parse_definition(
        {"agent": "a", "start": "n", "nodes": {"n": {"actionType": action, "parameters": parameters}}}
    )


def test_every_seed_action_is_known() -> None:
    assert set(ACTION_TYPES) == {
        "send_message",
        "wait_for_response",
        "trigger_agent",
        "request_document",
        "request_signature",
        "assign_test",
        "wait_for_event",
        "delay",
        "run_agent",
        "invoke",
        "llm",
    }


@pytest.mark.parametrize("kind", sorted(SEED_TABLE))
def test_seed_timeout_table_row(kind: str) -> None:
    default, maximum = SEED_TABLE[kind]
    action, params = WAIT_ACTIONS[kind]
    node = one(action, params).nodes["n"]
    assert node.parameters.timeout == WAIT_TIMEOUTS[kind][0]
    assert node.parameters.model_dump(mode="json", by_alias=True)["timeout"] == default
    assert one(action, {**params, "timeout": maximum}).nodes["n"].parameters.timeout == WAIT_TIMEOUTS[kind][1]
    above = WAIT_TIMEOUTS[kind][1] + timedelta(hours=1)
    with pytest.raises(DefinitionError, match=f"above the maximum of {maximum} for {kind} waits") as caught:
        one(action, {**params, "timeout": f"{int(above.total_seconds())}s"})
    assert caught.value.field == "nodes.n.parameters.timeout"


def test_delay_up_to_30_days() -> None:
    assert one("delay", {"duration": "30d"}).nodes["n"].parameters.duration == timedelta(days=30)
    with pytest.raises(DefinitionError, match="above the maximum of 30d"):
        one("delay", {"duration": "31d"})
    with pytest.raises(DefinitionError, match="exactly one of duration or until"):
        one("delay", {"duration": "1h", "until": "2026-01-01T00:00:00Z"})
    with pytest.raises(DefinitionError, match="has no time zone"):
        one("delay", {"until": "2026-01-01T00:00:00"})
    assert one("delay", {"until": "{{interviewAt}}"}).nodes["n"].parameters.until == "{{interviewAt}}"


@pytest.mark.parametrize(
    ("action", "parameters", "field", "reason"),
    [
        ("request_document", {"documents": []}, "nodes.n.parameters.documents", "at least 1"),
        ("request_document", {"documents": ["a", "a"]}, "nodes.n.parameters.documents", "distinct"),
        ("request_signature", {}, "nodes.n.parameters.document", "is required"),
        ("assign_test", {"test": ""}, "nodes.n.parameters.test", "at least 1"),
        ("trigger_agent", {"agent": "Bad Agent"}, "nodes.n.parameters.agent", "pattern"),
        (
            "trigger_agent",
            {"agent": "ok", "waitForCompletion": "maybe"},
            "nodes.n.parameters.waitForCompletion",
            "bool",
        ),
        ("wait_for_event", {"event": "x", "onTimeout": "explode"}, "nodes.n.parameters.onTimeout", "'continue'"),
        ("wait_for_response", {"maxRetries": 0}, "nodes.n.parameters.maxRetries", "greater than or equal to 1"),
        ("send_message", {"message": "hi {{ x.y[ }}"}, "nodes.n.parameters.message", "invalid placeholder"),
        (
            "request_document",
            {"documents": ["a"], "message": "{{ bad path }}"},
            "nodes.n.parameters.message",
            "invalid",
        ),
        ("trigger_agent", {"agent": "ok", "input": {"x": "{{1+1}}"}}, "nodes.n.parameters.input.x", "invalid"),
    ],
)
def test_bad_parameters_name_the_field(action: str, parameters: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        one(action, parameters)
    assert caught.value.field == field and reason in caught.value.reason


def test_rate_limit() -> None:
    data = {
        "agent": "a",
        "start": "n",
        "rateLimit": {"maxConcurrent": 2},
        "nodes": {"n": {"actionType": "send_message", "parameters": {"message": "x"}}},
    }
    definition = parse_definition(data)
    assert definition.rate_limit is not None and definition.rate_limit.max_concurrent == 2
    with pytest.raises(DefinitionError, match=r"rateLimit\.maxConcurrent"):
        parse_definition({**data, "rateLimit": {"maxConcurrent": 0}})


def test_compensation_policy_follows_the_seed() -> None:
    from dsmo.workflows.definition.node_types import CompensationPolicy

    policy = CompensationPolicy()
    assert policy.max_retries == 5 and policy.on == ["failed", "cancelled", "timeout"]
    assert [policy.delay(n).total_seconds() / 60 for n in range(1, 6)] == [1, 2, 4, 8, 16]


@pytest.mark.parametrize(
    ("node", "field", "reason"),
    [
        (
            {"actionType": "run_agent", "agent": "a", "compensate": {"kind": "annulment"}},
            "nodes.n.compensate.action",
            "required for a run_agent node",
        ),
        (
            {"actionType": "invoke", "action": "x", "compensate": {"kind": "refund"}},
            "nodes.n.compensate.kind",
            "'reversal'",
        ),
        (
            {"actionType": "invoke", "action": "x", "compensate": {"when": "output.status =="}},
            "nodes.n.compensate.when",
            "does not compile",
        ),
        (
            {"actionType": "invoke", "action": "x", "compensate": {"when": "status == 'a'"}},
            "nodes.n.compensate.when",
            "unknown field 'status'",
        ),
    ],
)
def test_bad_compensation_names_the_field(node: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_definition({"agent": "a", "start": "n", "nodes": {"n": node}})
    assert caught.value.field == field and reason in caught.value.reason
