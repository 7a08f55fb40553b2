"""Property-based: no input makes the loader, the condition evaluator or templating crash with
anything but the project's own errors, and none of them executes code."""

from __future__ import annotations

import contextlib
import string
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsmo.client.definition_files import parse_definition_text
from dsmo.workflows.common.errors import DefinitionError, TemplateError
from dsmo.workflows.common.templating import render, render_values
from dsmo.workflows.definition.conditions import ConditionError, check_condition, evaluate_condition

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
tokens = st.sampled_from(["{{", "}}", "|", "default(", ")", "'", '"', ".", "[0]", "a", "b.c", " ", "__class__", "1+1"])
templates = st.lists(tokens | st.text(alphabet=string.printable, max_size=5), max_size=12).map("".join)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PAYLOAD = "__import__('os').system('touch /tmp/dsmo-pwned')"


@SETTINGS
@given(st.text(max_size=300))
def test_loader_only_raises_definition_errors_on_text(text: str) -> None:
    with contextlib.suppress(DefinitionError):
        parse_definition_text(text, source="fuzz.yaml")


@SETTINGS
@given(st.dictionaries(st.sampled_from(["agent", "start", "nodes", "version", "config", "x"]), json_values, max_size=5))
def test_loader_only_raises_definition_errors_on_data(data: dict[str, Any]) -> None:
    import json

    with contextlib.suppress(DefinitionError):
        parse_definition_text(json.dumps(data), source="fuzz.json")


@SETTINGS
@given(templates, st.dictionaries(st.text(max_size=5), json_values, max_size=4))
def test_templates_render_or_raise_template_errors(template: str, variables: dict[str, Any]) -> None:
    try:
        assert isinstance(render(template, variables), str)
        render_values({"x": template}, variables)
    except TemplateError:
        pass


@SETTINGS
@given(
    st.text(alphabet=string.printable, max_size=60), st.dictionaries(st.sampled_from(["a", "b", "stages"]), json_values)
)
def test_conditions_evaluate_or_raise_condition_errors(expression: str, activation: dict[str, Any]) -> None:
    with contextlib.suppress(ConditionError):
        assert isinstance(evaluate_condition(expression, activation), bool)
    with contextlib.suppress(ConditionError):
        check_condition(expression, inputs=["a", "b"], stages=[], config_keys=[])


def test_no_code_runs_from_templates_or_conditions(tmp_path: Any) -> None:
    import os

    for attempt in (f"{{{{{PAYLOAD}}}}}", "{{a.__class__.__mro__}}"):
        with contextlib.suppress(TemplateError):
            render(attempt, {"a": {}})
    with contextlib.suppress(ConditionError):
        evaluate_condition(PAYLOAD, {})
    assert not os.path.exists("/tmp/dsmo-pwned")
