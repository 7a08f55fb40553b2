"""`llm` nodes: what publishing checks, and the pure parts of the stage and of replay's diff."""

from __future__ import annotations

from typing import Any

import pytest

from dsmo.activities.contract_schemas import compile_schema
from dsmo.activities.llm_answers import answer_summary, check_answer
from dsmo.activities.llm_stage import LlmEndpoint
from dsmo.client.replay import answer_changes
from dsmo.config.llm_settings import LlmSettings
from dsmo.config.settings import Settings, SettingsError
from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.definition.model import parse_definition

SCHEMA = {"type": "object", "required": ["label"], "properties": {"label": {"enum": ["a", "b"]}, "why": {}}}


def definition(**node: Any) -> Any:
    return parse_definition(
        {
            "agent": "llm-check",
            "inputs": ["text"],
            "start": "ask",
            "nodes": {"ask": {"actionType": "llm", "prompt": "Label {{input.text}}", **node}},
        }
    )


def test_a_complete_llm_node_is_admitted() -> None:
    node = definition(system="Be brief about {{text}}", outputSchema=SCHEMA, summary=["label"], model="fast")
    assert node.nodes["ask"].agent == "llm" and node.nodes["ask"].retries == 1


@pytest.mark.parametrize(
    ("node", "field", "reason"),
    [
        ({"outputSchema": {"type": "object", "properties": {"x": {"type": "nope"}}}}, "nodes.ask.outputSchema", "nope"),
        ({"outputSchema": {"type": "array"}}, "nodes.ask.outputSchema.type", "object"),
        ({"outputSchema": SCHEMA, "summary": ["score"]}, "nodes.ask.summary", "'score' is not a property"),
        ({"summary": ["label"]}, "nodes.ask.summary", "plain-text answer"),
        ({"prompt": "Label {{ticket.text}}"}, "nodes.ask.prompt", "unknown variable 'ticket'"),
        ({"system": "{{stages.nope.summary}}"}, "nodes.ask.system", "unknown stage 'nope'"),
        # Conditions read `run` (its usage, id...) and `config`; templates read the run's variables.
        ({"prompt": "Spent {{run.usage.tokens}}"}, "nodes.ask.prompt", "conditions read but templates cannot"),
        ({"system": "{{config.tone}}"}, "nodes.ask.system", "conditions read but templates cannot"),
        ({"temperature": 3}, "nodes.ask.temperature", "less than or equal to 2"),
        ({"retries": 9}, "nodes.ask.retries", "less than or equal to 5"),
        ({"agent": "x"}, "nodes.ask.agent", "not a known field"),
        # Patterns are matched by RE2 (linear time), which has no lookaround or backreferences.
        (
            {"outputSchema": {"properties": {"x": {"type": "string", "pattern": "^(?!no)"}}}},
            "nodes.ask.outputSchema.properties.x.pattern",
            "linear-time engine (RE2)",
        ),
        ({"outputSchema": {"patternProperties": {"(a)\\1": {}}}}, "nodes.ask.outputSchema.patternProperties", "RE2"),
        (
            {"outputSchema": {"patternProperties": {"^x": {}}, "unevaluatedProperties": False}},
            "nodes.ask.outputSchema.unevaluatedProperties",
            "not supported beside patternProperties",
        ),
        # A schema that refers to itself before it reads the answer never ends on any answer.
        ({"outputSchema": {"$ref": "#"}}, "nodes.ask.outputSchema", "refers to itself without end"),
        ({"outputSchema": {"allOf": [{"$ref": "#"}]}}, "nodes.ask.outputSchema", "refers to itself without end"),
    ],
)
def test_publishing_names_the_broken_field(node: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        definition(**node)
    assert caught.value.field.startswith(field) and reason in str(caught.value)


def test_an_answer_is_parsed_then_checked() -> None:
    schema = compile_schema(SCHEMA)
    assert check_answer('{"label": "a"}', schema) == (None, {"label": "a"})
    assert check_answer("label: a", schema)[0].startswith("it is not JSON")  # type: ignore[union-attr]
    assert check_answer("[1]", schema)[0] == "it is a JSON list, not an object"
    assert "label" in (check_answer('{"label": "c"}', schema)[0] or "")


def test_an_answer_with_a_non_finite_number_or_nested_too_deep_is_a_problem() -> None:
    schema = compile_schema({"type": "object", "properties": {"score": {"type": "number"}}})
    assert (
        check_answer('{"score": NaN}', schema)[0] == "answer.score: nan is not a JSON number (numbers must be finite)"
    )
    assert (
        check_answer('{"score": 1e999}', schema)[0] == "answer.score: inf is not a JSON number (numbers must be finite)"
    )
    assert check_answer('{"a": ' * 3_000 + "1" + "}" * 3_000, schema)[0] == "it is nested too deep"
    assert "nested more than 64 levels deep" in (check_answer('{"a": ' * 100 + "1" + "}" * 100, schema)[0] or "")
    # A recursive schema is fine as long as the answer bounds it.
    tree = compile_schema({"type": "object", "properties": {"child": {"$ref": "#"}}})
    assert check_answer('{"child": {"child": {}}}', tree) == (None, {"child": {"child": {}}})


def test_the_default_summary_keeps_short_scalar_fields() -> None:
    answer = {"label": "a", "score": 0.5, "ok": True, "none": None, "long": "x" * 201, "items": [1]}
    assert answer_summary(answer, None) == {"label": "a", "score": 0.5, "ok": True, "none": None}
    assert answer_summary(answer, ["items", "missing"]) == {"items": [1], "missing": None}


def test_models_resolve_through_the_workers_aliases() -> None:
    endpoint = LlmEndpoint("http://x/v1", default_model="base", aliases={"fast": "small-1"})
    assert (endpoint.model(None), endpoint.model("fast"), endpoint.model("other")) == ("base", "small-1", "other")
    assert LlmSettings(models="fast = small-1, smart=big-2").aliases == {"fast": "small-1", "smart": "big-2"}
    with pytest.raises(SettingsError, match="DSMO_LLM_MODELS: 'fast' is not alias=model"):
        Settings.from_env({"DSMO_LLM_MODELS": "fast"})


def test_the_response_cap_is_a_setting_with_a_4_mib_default() -> None:
    assert Settings.from_env({}).llm.max_response_bytes == 4 << 20 == LlmEndpoint("").max_response_bytes
    assert Settings.from_env({"DSMO_LLM_MAX_RESPONSE_BYTES": "65536"}).llm.max_response_bytes == 65536
    with pytest.raises(SettingsError, match="DSMO_LLM_MAX_RESPONSE_BYTES: 10 is below 1024"):
        Settings.from_env({"DSMO_LLM_MAX_RESPONSE_BYTES": "10"})
    with pytest.raises(SettingsError, match="DSMO_LLM_MAX_RESPONSE_BYTES: '4M' is not a whole number"):
        Settings.from_env({"DSMO_LLM_MAX_RESPONSE_BYTES": "4M"})


def test_replay_lists_what_changed_in_an_answer() -> None:
    before = {"label": "a", "detail": {"score": 1}, "gone": 1}
    after = {"label": "b", "detail": {"score": 1}, "new": [1]}
    assert answer_changes(before, after) == ['label: "a" -> "b"', "gone: 1 -> (absent)", "new: (absent) -> [1]"]
    assert answer_changes(before, before) == []
