"""Declared schemas: patterns matched by RE2, checks that end as contract violations, plain JSON only."""

from __future__ import annotations

import math
from typing import Any

import pytest

from dsmo.activities.contract_schemas import SchemaDoesNotCompile, compile_schema
from dsmo.activities.json_values import json_problem
from dsmo.activities.plugin_errors import ContractViolation
from dsmo.activities.processors import Processor, ProcessorOutput


def violation(schema: dict[str, Any], document: Any) -> str | None:
    compiled = compile_schema(schema)
    assert compiled is not None
    try:
        compiled.check(document, agent="a", what="output")
    except ContractViolation as err:
        return str(err)
    return None


def test_a_backtracking_pattern_is_matched_in_linear_time() -> None:
    # Python's `re` would take ~2^40 steps here (days); RE2 answers at once.
    schema = {"properties": {"word": {"type": "string", "pattern": "^(a+)+$"}}}
    assert "does not match '^(a+)+$'" in (violation(schema, {"word": "a" * 40 + "!"}) or "")
    assert violation(schema, {"word": "a" * 40}) is None
    keys = {"patternProperties": {"^(a+)+$": {"type": "integer"}}, "additionalProperties": False}
    assert "does not match any of the regexes" in (violation(keys, {"a" * 40 + "!": 1}) or "")
    assert violation(keys, {"aaa": 1}) is None
    assert "is not of type 'integer'" in (violation(keys, {"aaa": "x"}) or "")


def test_additional_properties_behave_as_before() -> None:
    schema = {"properties": {"a": {}}, "additionalProperties": False}
    assert "('b', 'c' were unexpected)" in (violation(schema, {"a": 1, "b": 2, "c": 3}) or "")
    assert violation({"additionalProperties": {"type": "string"}}, {"x": 1}) is not None
    assert violation({"additionalProperties": {"type": "string"}}, {"x": "y"}) is None


@pytest.mark.parametrize("pattern", ["(?=a)", "(?<!a)b", "(a)\\1"])
def test_a_pattern_re2_cannot_compile_does_not_compile(pattern: str) -> None:
    with pytest.raises(SchemaDoesNotCompile, match=r"properties\.x\.pattern: .* linear-time engine \(RE2\)"):
        compile_schema({"properties": {"x": {"pattern": pattern}}})


def test_a_pattern_in_data_keywords_is_data() -> None:
    assert compile_schema({"enum": [{"pattern": "(?=a)"}], "default": {"pattern": "(?=a)"}}) is not None


def test_a_check_that_cannot_end_is_a_contract_violation() -> None:
    assert "refers to itself without end" in (violation({"$ref": "#"}, {}) or "")
    deep: Any = 1
    for _ in range(2_000):
        deep = {"a": deep}
    assert "nests too deep" in (violation({"additionalProperties": {"$ref": "#"}}, deep) or "")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"x": math.nan}, "output.x: nan is not a JSON number (numbers must be finite)"),
        ({"x": [1, -math.inf]}, "output.x[1]: -inf is not a JSON number (numbers must be finite)"),
        ({"x": {1, 2}}, "output.x: a Python set is not a JSON value"),
        ({"x": object()}, "output.x: a Python object is not a JSON value"),
        ({1: "x"}, "output: the key 1 is not a string (JSON object keys are strings)"),
        ({"x": [[[[]]]] * 1}, None),
        ({"s": "t", "n": None, "b": True, "i": 3, "f": 0.5, "t": (1, 2)}, None),
    ],
)
def test_only_plain_json_is_stored(value: Any, problem: str | None) -> None:
    assert json_problem(value, what="output") == problem


def test_nesting_is_bounded_without_recursion() -> None:
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    assert json_problem({"x": deep}, what="output") == "output.x" + "[0]" * 63 + ": nested more than 64 levels deep"


def test_a_processor_returning_what_json_cannot_hold_breaks_its_contract() -> None:
    processor = Processor("p", "1.0.0", lambda document, message: None)
    for output in (
        ProcessorOutput({"confidence": math.nan}),
        ProcessorOutput({"ok": True}, summary={"tags": {"a"}}),
        ProcessorOutput({"ok": True}, inference={"model": object()}),
    ):
        with pytest.raises(ContractViolation, match=r"^agent p: (output|summary|inference)"):
            processor.check_result(output)
