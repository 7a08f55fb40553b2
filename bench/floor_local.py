"""The floor comparison's rows for local stages (issue 57): B3's and the floor's, both local.

B3 with its stages as Temporal local activities, beside the floor plus artifact I/O doing the
same work on local activities.

Results written before these sides existed lack them: every row here is then left out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

# Issue 57: W1 p50 at most 1.1x raw Temporal with local activities doing the same work.
W1_P50_LOCAL_TARGET = "≤ 1.1"
SIDES = ("b3_local", "floor_io_local")


def _cpu_ms_per_run(shape: dict[str, Any]) -> float:
    return float(sum(shape["cpu_ms_per_run"].values()))


def local_rows(floor: dict[str, Any]) -> list[tuple[str, float, float, float, str]]:
    """The floor table's rows for the local sides: (label, B3 local, floor local, ratio, target).

    Args:
        floor: one floor comparison's results (`FloorComparison.floor`).

    Returns:
        W1 p50 and W4 throughput, and W4 CPU per run when it was sampled; none for older results.
    """
    ratios = floor["ratios"]
    if not all(side in floor for side in SIDES) or "w1_p50_local" not in ratios:
        return []
    ours, base = (floor[side] for side in SIDES)
    against = "B3, local stages / floor + I/O, local activities"
    rows = [
        (
            f"W1 latency p50 (s), {against}",
            ours["W1"]["p50"],
            base["W1"]["p50"],
            ratios["w1_p50_local"],
            W1_P50_LOCAL_TARGET,
        ),
        (
            f"W4 throughput (runs/min), {against}",
            ours["W4"]["throughput"],
            base["W4"]["throughput"],
            ratios["w4_throughput_local"],
            "",
        ),
    ]
    if "cpu_ms_per_run" in ours["W4"] and "cpu_ms_per_run" in base["W4"]:
        spent, floor_spent = _cpu_ms_per_run(ours["W4"]), _cpu_ms_per_run(base["W4"])
        rows.append((f"W4 CPU ms per run (whole stack), {against}", spent, floor_spent, spent / floor_spent, ""))
    return rows


def _ratio(key: str) -> Callable[[dict[str, Any]], float]:
    """One repeat's local ratio ``key``; NaN when that repeat did not measure the local sides."""

    def value(result: dict[str, Any]) -> float:
        return float(result["floor"]["ratios"].get(key, math.nan))

    return value


# The spread table's rows for the local sides: (label, value, target), as `report.SPREAD_ROWS`.
LOCAL_SPREAD_ROWS: tuple[tuple[str, Callable[[dict[str, Any]], float], str], ...] = (
    ("W1 latency p50, B3 local stages / (floor + I/O, local activities)", _ratio("w1_p50_local"), W1_P50_LOCAL_TARGET),
    ("W4 throughput, B3 local stages / (floor + I/O, local activities)", _ratio("w4_throughput_local"), ""),
)
