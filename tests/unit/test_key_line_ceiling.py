"""A shard's ceiling: a run already started is lined up up to it, and refused past it with the bytes."""

from __future__ import annotations

from dsmo.workflows.flow.key_lines import (
    SHARD_BUDGET,
    SHARD_CEILING,
    KeyLine,
    carried_bytes,
    ceiling_refusal,
    entry_bytes,
    line_refusal,
)


def _shard(carrying: int) -> dict[str, KeyLine]:
    """One line whose runs (ids of 1,000 characters) bring the shard to about ``carrying`` bytes."""
    count = carrying // entry_bytes("x" * 1_000)
    return {"line": KeyLine(max_concurrent=1, holders=["h"], queue=[f"{i:04d}" + "x" * 996 for i in range(count)])}


def test_a_run_is_lined_up_between_the_budget_and_the_ceiling() -> None:
    lines = _shard(SHARD_BUDGET + 100_000)
    assert SHARD_BUDGET < carried_bytes(lines) < SHARD_CEILING
    assert line_refusal(lines, lines["line"], "late") is not None  # a starter's claim is refused here
    assert ceiling_refusal(lines, "late") is None  # a run already started still waits


def test_past_the_ceiling_the_refusal_names_what_the_shard_carries_and_its_ceiling() -> None:
    lines = _shard(SHARD_CEILING + entry_bytes("x" * 1_000))
    carried = carried_bytes(lines)
    assert carried + entry_bytes("late") > SHARD_CEILING
    assert ceiling_refusal(lines, "late") == (
        f"its lock shard already carries {carried:,} bytes of run ids in line (at most {SHARD_CEILING:,})"
    )
