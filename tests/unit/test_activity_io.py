"""What the workflow hands its stages: the run input inline up to a size, envelopes unwrapped."""

from __future__ import annotations

import json

from dsmo.activities.stage import STAGE_OUTPUT_KIND, stage_input
from dsmo.workflows.contracts.activity_io import INLINE_INPUT_MAX_BYTES, inline_input


def _sized(size: int, char: str = "x") -> dict[str, str]:
    """A document whose compact JSON is exactly ``size`` bytes, made of ``char`` repeated."""
    width = len(char.encode())
    overhead = len(json.dumps({"t": ""}, separators=(",", ":")).encode())
    assert (size - overhead) % width == 0
    return {"t": char * ((size - overhead) // width)}


def test_an_input_up_to_the_cap_is_sent_inline() -> None:
    document = _sized(INLINE_INPUT_MAX_BYTES)
    assert inline_input(document) is document
    assert inline_input({}) == {}


def test_an_input_above_the_cap_is_read_by_reference() -> None:
    assert inline_input(_sized(INLINE_INPUT_MAX_BYTES + 1)) is None


def test_the_cap_counts_utf8_bytes_not_characters() -> None:
    characters = INLINE_INPUT_MAX_BYTES // 2
    assert inline_input({"t": "x" * characters}) is not None
    assert inline_input({"t": "é" * characters}) is None  # two bytes each
    assert inline_input(_sized(INLINE_INPUT_MAX_BYTES, "é")) is not None


def test_a_stage_gets_the_output_inside_an_envelope_and_anything_else_as_is() -> None:
    assert stage_input({"kind": STAGE_OUTPUT_KIND, "output": {"a": 1}, "summary": {}}) == {"a": 1}
    assert stage_input({"document": {"text": "x"}}) == {"document": {"text": "x"}}
    assert stage_input([1, 2]) == [1, 2]
