"""Inputs and event data hold only numbers JSON can hold; definitions keep loading as they did."""

from __future__ import annotations

import json

import pytest

from dsmo.workflows.common.document_limits import (
    DEFINITION_LIMITS,
    EVENT_LIMITS,
    INPUT_LIMITS,
    NotJsonNumber,
    check_document,
)


@pytest.mark.parametrize(
    ("text", "where", "reason"),
    [
        ('{"x": NaN}', "input.x", "NaN is not a JSON number"),
        ('{"a": [1, {"b": 1e400}]}', "input.a[1].b", "an infinity"),
        ('{"a": -Infinity}', "input.a", "an infinity"),
        ('{"n": ' + "9" * 4100 + "}", "input.n", "more than 4,000 digits"),
    ],
)
def test_a_number_json_cannot_hold_is_refused_naming_its_place(text: str, where: str, reason: str) -> None:
    with pytest.raises(NotJsonNumber) as refused:
        check_document(json.loads(text), field="input", limits=INPUT_LIMITS)
    assert str(refused.value).startswith(f"{where}: ") and reason in str(refused.value), str(refused.value)


def test_event_data_is_held_to_json_numbers_and_definitions_are_not() -> None:
    with pytest.raises(NotJsonNumber):
        check_document({"score": float("nan")}, field="reply.data", limits=EVENT_LIMITS)
    check_document({"score": float("nan")}, field="definition", limits=DEFINITION_LIMITS)


def test_ordinary_numbers_and_booleans_pass() -> None:
    check_document({"n": 10**3999, "f": 1e308, "t": True, "z": -0.0}, field="input", limits=INPUT_LIMITS)
