"""The paper's static checks on G=(S,T) and the CEL conditions φ, each naming the node."""

from __future__ import annotations

from typing import Any

import pytest

from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.definition.conditions import ConditionError, evaluate_condition
from dsmo.workflows.definition.model import parse_definition


def pipeline(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "agent": "triage",
        "start": "classify",
        "inputs": ["priority"],
        "config": {"minScore": 0.5},
        "failSafe": "review",
        "nodes": {
            "classify": {
                "actionType": "run_agent",
                "agent": "rule-classify",
                "transitions": [
                    {"when": 'stages.classify.summary.category == "invoice"', "to": "invoice"},
                    {"when": "stages.classify.summary.score < config.minScore", "to": "review"},
                    {"to": "other"},
                ],
            },
            "invoice": {"actionType": "send_message", "parameters": {"message": "invoice"}},
            "other": {"actionType": "send_message", "parameters": {"message": "other"}},
            "review": {"actionType": "send_message", "parameters": {"message": "review"}},
        },
    }
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = data
        for part in parents:
            target = target[part]
        target[last] = value
    return data


def test_a_valid_graph() -> None:
    definition = parse_definition(pipeline())
    assert definition.fail_safe == "review" and len(definition.nodes["classify"].transitions) == 3


TRANSITIONS = ["nodes", "classify", "transitions"]


def with_transitions(transitions: list[dict[str, Any]]) -> dict[str, Any]:
    data = pipeline()
    data["nodes"]["classify"]["transitions"] = transitions
    return data


def without(*removed: str, transitions: list[dict[str, Any]]) -> dict[str, Any]:
    data = with_transitions(transitions)
    for node in removed:
        data["nodes"].pop(node)
    return data


@pytest.mark.parametrize(
    ("data", "field", "reason"),
    [
        (
            with_transitions([{"when": "stages.classify.summary.score >", "to": "other"}]),
            "nodes.classify.transitions.0.when",
            "does not compile",
        ),
        (
            with_transitions([{"when": "amount > 3", "to": "other"}]),
            "nodes.classify.transitions.0.when",
            "unknown field 'amount'",
        ),
        (
            with_transitions([{"when": "stages.nope.status == 'ok'", "to": "other"}]),
            "nodes.classify.transitions.0.when",
            "unknown stage 'nope'",
        ),
        (
            with_transitions([{"when": "config.maxScore > 1.0", "to": "other"}]),
            "nodes.classify.transitions.0.when",
            "unknown config key 'maxScore'",
        ),
        (
            with_transitions([{"to": "other"}, {"when": "priority == 1", "to": "invoice"}]),
            "nodes.classify.transitions.0.when",
            "only the last transition may omit",
        ),
        (
            with_transitions([{"when": "priority == 1", "to": "invoice"}, {"when": "priority  ==  1", "to": "other"}]),
            "nodes.classify.transitions.1.when",
            "ambiguous ordering",
        ),
        (
            with_transitions([{"when": "priority == 1", "to": "ghost"}]),
            "nodes.classify.transitions.0.to",
            "unknown node 'ghost'",
        ),
        (pipeline(failSafe="ghost"), "failSafe", "unknown node 'ghost'"),
        (pipeline(nodes__classify__next="other"), "nodes.classify.transitions", "either next or transitions"),
        (
            with_transitions([{"when": "priority == 1", "to": "invoice"}, {"to": "review"}]),
            "nodes.other",
            "unreachable from start",
        ),
        (
            without("invoice", "other", transitions=[{"when": "priority == 1", "to": "classify"}, {"to": "classify"}]),
            "nodes.classify",
            "no path to an end node",
        ),
    ],
)
def test_static_checks_name_the_node(data: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_definition(data)
    assert caught.value.field == field, str(caught.value)
    assert reason in caught.value.reason


def test_a_loop_with_an_exit_is_fine() -> None:
    data = without("invoice", transitions=[{"when": "priority > 1", "to": "classify"}, {"to": "other"}])
    assert parse_definition(data).nodes["classify"].transitions[0].to == "classify"


def test_macro_variables_are_not_unknown_fields() -> None:
    data = with_transitions(
        [{"when": "stages.classify.summary.tags.exists(t, t == 'x')", "to": "invoice"}, {"to": "other"}]
    )
    assert parse_definition(data)


@pytest.mark.parametrize(
    ("expression", "activation", "expected"),
    [
        ('lastResponse.lowerAscii().contains("si")', {"lastResponse": "SI, claro"}, True),
        (
            "stages.a.summary.score >= config.min",
            {"stages": {"a": {"summary": {"score": 0.7}}}, "config": {"min": 0.5}},
            True,
        ),
        ("size(documentUrls) == 2", {"documentUrls": ["a", "b"]}, True),
        ('run.agent == "x"', {"run": {"agent": "y"}}, False),
    ],
)
def test_evaluate(expression: str, activation: dict[str, Any], expected: bool) -> None:
    assert evaluate_condition(expression, activation) is expected


@pytest.mark.parametrize(
    ("expression", "activation", "reason"),
    [
        ("stages.a.summary.score > 1", {"stages": {}}, "failed"),
        ('"a" > 1', {}, "failed"),
        ("1 + 1", {}, "yielded int, not a bool"),
    ],
)
def test_evaluation_errors_are_condition_errors(expression: str, activation: dict[str, Any], reason: str) -> None:
    with pytest.raises(ConditionError, match=reason):
        evaluate_condition(expression, activation)
