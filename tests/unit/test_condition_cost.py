"""Conditions have a cost bound: refused at publish above the budget, never evaluated above it."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsmo.workflows.definition import condition_cost as cost
from dsmo.workflows.definition.conditions import (
    ConditionCostExceeded,
    ConditionError,
    ConditionScope,
    check_condition,
    evaluate_condition,
    runtime_cost,
)


def nested_maps(depth: int, collection: str = "L") -> str:
    return "size(" + "".join(f"{collection}.map(a{i}, " for i in range(depth)) + "1" + ")" * depth + ") > 0"


def publish(expression: str) -> None:
    check_condition(expression, inputs=["L", "s"], stages=[], config_keys=[])


def test_shape_counts_nesting_and_ignores_strings() -> None:
    assert cost.shape("L.all(a, L.exists(b, a == b)) && L.map(c, c).size() > 0").depths == (1, 2, 1)
    assert cost.shape('s == "L.map(a, L.map(b, 1))"').depths == ()
    assert cost.shape("[1, 2].filter(x, x > 1).exists(y, [3].exists(z, z == y))").depths == (1, 1, 2)


def test_the_reported_wedge_is_refused_at_publish() -> None:
    with pytest.raises(ConditionCostExceeded, match="nests comprehensions 6 deep"):
        publish(nested_maps(6))
    with pytest.raises(ConditionCostExceeded, match="nests comprehensions 3 deep"):
        publish(nested_maps(3))
    publish(nested_maps(2))  # 100 x 100: within the budget
    pairs = " && ".join(["L.exists(a, L.exists(b, a == b))"] * 10)
    with pytest.raises(ConditionCostExceeded, match="may visit 101,000 elements with 100-item collections"):
        publish(pairs)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("size(lists.range(100000000)) > 0", "would build more than 10000 items"),
        ('"a"' + '.replace("a", "aa")' * 27 + ' == ""', "above 65536"),
    ],
)
def test_growing_functions_stop_at_their_caps(expression: str, reason: str) -> None:
    with pytest.raises(ConditionCostExceeded, match=reason):
        evaluate_condition(expression, {"L": [], "s": ""})


def test_at_run_time_the_real_sizes_decide() -> None:
    expression = "L.exists(a, L.exists(b, a + b == -1))"
    publish(expression)
    assert evaluate_condition(expression, {"L": list(range(100))}) is False
    with pytest.raises(ConditionCostExceeded, match="was not evaluated"):
        evaluate_condition(expression, {"L": list(range(5_000))})
    assert issubclass(ConditionCostExceeded, ConditionError)  # routed like any contract violation


COMPREHENSION = st.sampled_from(["map", "filter", "all", "exists", "exists_one"])


@st.composite
def nested_comprehensions(draw: Any) -> str:
    depth = draw(st.integers(min_value=1, max_value=5))
    kinds = [draw(COMPREHENSION) for _ in range(depth)]
    inner = "true"
    for index, kind in reversed(list(enumerate(kinds))):
        inner = f"L.{kind}(v{index}, {inner})"
        if kind in ("map", "filter"):
            inner = f"size({inner}) >= 0"
    return inner


@st.composite
def string_builders(draw: Any) -> str:
    steps = draw(st.lists(st.sampled_from(['.replace("a", "aa")', " + s", '.replace("", "xy")']), max_size=30))
    return "size(s" + "".join(steps) + ") >= 0"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=st.one_of(nested_comprehensions(), string_builders()), items=st.integers(0, cost.ASSUMED_ITEMS))
def test_published_conditions_evaluate_within_the_bound(expression: str, items: int) -> None:
    try:
        publish(expression)
    except ConditionCostExceeded:
        return  # refused at publish
    activation = {"L": list(range(items)), "s": "a" * 100}
    assert runtime_cost(expression, activation) <= cost.COST_BUDGET
    with contextlib.suppress(ConditionCostExceeded):  # a capped function stopped it (a string past its cap)
        assert isinstance(evaluate_condition(expression, activation), bool)


class CountingFacts(dict):  # type: ignore[type-arg]
    """Facts that count how often each root is read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads: dict[str, int] = {}

    def __getitem__(self, key: str) -> Any:
        self.reads[key] = self.reads.get(key, 0) + 1
        return super().__getitem__(key)


def test_a_scope_hands_cel_only_the_roots_named_and_each_once_for_many_events() -> None:
    facts = CountingFacts(big=[[] for _ in range(20_000)], small={"limit": 2}, unused=list(range(99_000)))
    scope = ConditionScope(facts)
    expression = "size(big) > small.limit && event.data.text == 'go'"
    verdicts = [scope.evaluate(expression, {"event": {"data": {"text": text}}}) for text in ["no"] * 99 + ["go"]]
    assert verdicts == [False] * 99 + [True]
    assert facts.reads == {"big": 1, "small": 1}  # `unused` never converted; the rest once for 100 events
