"""The floor comparison's local sides (issue 57): B3 with local stages beside the floor plus I/O on
local activities, their ratios, and their rows in the floor and spread tables, on hand-made data."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from bench.cpu import CpuMeter
from bench.floor import SIDES, FloorComparison
from bench.floor_local import local_rows
from bench.report import floor_spread, floor_table
from bench.workloads import definition, local_definition
from dsmo.workflows.definition.local_stages import runs_locally

LABEL = "B3, local stages / floor + I/O, local activities"
SPREAD_W1 = "W1 latency p50, B3 local stages / (floor + I/O, local activities)"
SPREAD_W4 = "W4 throughput, B3 local stages / (floor + I/O, local activities)"


def _side(p50: float, throughput: float, cpu: float) -> dict[str, Any]:
    measured = {"p50": p50, "p95": p50 * 2, "throughput": throughput, "cpu_ms_per_run": {"python": cpu}}
    return {"W1": measured, "W4": measured}


def _floor(*, local: bool = True, w1_p50_local: float = 0.105 / 0.1, w4_local: float = 0.9) -> dict[str, Any]:
    floor: dict[str, Any] = {
        **_side(0.100, 2000, 40.0),
        "b3": _side(0.150, 1500, 60.0),
        "floor_io": _side(0.120, 1800, 50.0),
        "floor_io_sa": _side(0.125, 1700, 52.0),
        "ratios": {"w1_p50": 1.5, "w1_p95": 1.5, "w1_throughput": 0.75, "w4_throughput": 0.75},
        "io_ratios": {
            "w1_p50_io": 1.2,
            "w1_p50_b3": 1.25,
            "w4_throughput_io": 0.9,
            "w4_throughput_b3": 0.83,
            "w1_p50_sa": 1.04,
            "w1_p50_b3_sa": 1.2,
            "w4_throughput_sa": 0.94,
            "w4_throughput_b3_sa": 0.88,
        },
    }
    if local:
        floor["b3_local"] = _side(0.105, 2700, 30.0)
        floor["floor_io_local"] = _side(0.100, 3000, 20.0)
        floor["ratios"].update(w1_p50_local=w1_p50_local, w4_throughput_local=w4_local)
    return floor


def _results(floor: dict[str, Any]) -> dict[str, Any]:
    resume = {"b3_p50": 0.05, "bare_p50": 0.04, "ratio": 1.25, "inbox_p50": 0.02}
    return {"floor": floor, "resume": resume, "history_bytes": {}}


def _rows(table: str) -> dict[str, str]:
    """The table's rows by label; the first table's where a later one repeats a label."""
    rows: dict[str, str] = {}
    for line in table.splitlines():
        if line.startswith("| "):
            rows.setdefault(line.split(" | ")[0].lstrip("| "), line)
    return rows


def test_local_definition_runs_every_stage_locally_and_is_otherwise_the_same() -> None:
    for workload in ("W1", "W4"):
        regular, local = definition(workload), local_definition(workload)
        assert local is local_definition(workload)  # cached, as `definition` is
        assert set(local.nodes) == set(regular.nodes) == {"A", "B", "C"}
        assert all(runs_locally(local, node) for node in local.nodes.values())
        assert not any(runs_locally(regular, node) for node in regular.nodes.values())
        strip = {"local"}
        for name, node in local.nodes.items():
            assert node.model_dump(exclude=strip) == regular.nodes[name].model_dump(exclude=strip)
        assert local.agent == regular.agent and local.start == regular.start


def test_local_rows_put_b3_local_beside_the_local_floor_with_the_issue_target() -> None:
    rows = local_rows(_floor())
    assert rows == [
        (f"W1 latency p50 (s), {LABEL}", 0.105, 0.100, pytest.approx(1.05), "≤ 1.1"),
        (f"W4 throughput (runs/min), {LABEL}", 2700, 3000, 0.9, ""),
        (f"W4 CPU ms per run (whole stack), {LABEL}", 30.0, 20.0, 1.5, ""),
    ]


def test_results_without_the_local_sides_have_no_local_rows() -> None:
    assert local_rows(_floor(local=False)) == []
    table = floor_table(_results(_floor(local=False)))
    assert LABEL not in table
    assert SPREAD_W1 not in floor_spread([_results(_floor(local=False))])


def test_floor_table_shows_the_local_rows_after_w4_and_w4_against_its_new_target() -> None:
    table = floor_table(_results(_floor()))
    rows = _rows(table)
    assert rows[f"W1 latency p50 (s), {LABEL}"] == f"| W1 latency p50 (s), {LABEL} | 0.105 | 0.100 | 1.05x | ≤ 1.1 |"
    assert rows[f"W4 throughput (runs/min), {LABEL}"].endswith("| 2700.000 | 3000.000 | 0.90x |  |")
    assert rows["W4 throughput (runs/min)"].endswith("| 0.75x | ≥ 1.0 |")
    labels = list(rows)
    assert labels.index("W4 throughput (runs/min)") < labels.index(f"W1 latency p50 (s), {LABEL}")
    assert labels.index(f"W4 CPU ms per run (whole stack), {LABEL}") < labels.index(
        "Resume: event → next action started p50 (s)"
    )


def test_floor_spread_counts_the_local_target_met_per_repeat() -> None:
    repeats = [_results(_floor(w1_p50_local=value, w4_local=w4)) for value, w4 in ((1.05, 0.9), (1.2, 1.1), (1.1, 1.0))]
    rows = _rows(floor_spread(repeats))
    assert rows[SPREAD_W1].endswith("| 1.05 | 1.20 | 1.10 | 1.10 | 1.05-1.20 | ≤ 1.1 | 2 of 3 |")
    assert rows[SPREAD_W4].endswith("| 0.90 | 1.10 | 1.00 | 1.00 | 0.90-1.10 |  |  |")
    assert rows["W4 throughput, B3 / floor"].endswith("| ≥ 1.0 | 0 of 3 |")


class _Meter:
    def sample(self) -> dict[str, float]:
        return {"python": 0.0}


class _Stubbed(FloorComparison):
    """The comparison with every side's run replaced by a fixed latency, recording the order."""

    LATENCY = {"b3": 0.3, "b3_local": 0.22, "floor": 0.1, "floor_io": 0.15, "floor_io_sa": 0.16, "floor_io_local": 0.2}

    def __init__(self, rounds: int) -> None:
        self.config = SimpleNamespace(
            paired_rounds=rounds, paired_waves=1, inputs=1, replays=0, concurrency=1, w4_runs=1, w4_concurrency=1
        )
        self.settings = SimpleNamespace()  # type: ignore[assignment]
        self.order: list[str] = []

    def _ran(self, side: str) -> float:
        self.order.append(side)
        return self.LATENCY[side]

    async def b3_latency(self, workload: str, *, local: bool = False) -> float:
        return self._ran("b3_local" if local else "b3")

    async def _floor_run(self) -> float:
        return self._ran("floor")

    async def _floor_io_run(self, *, visible: bool = False, local: bool = False) -> float:
        return self._ran("floor_io_local" if local else "floor_io_sa" if visible else "floor_io")


async def test_the_floor_rotates_six_sides_and_computes_the_local_ratios(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CpuMeter, "for_stack", classmethod(lambda cls, settings: _Meter()))
    comparison = _Stubbed(rounds=len(SIDES))
    measured = await comparison.floor()
    assert set(SIDES) == {"b3", "b3_local", "floor", "floor_io", "floor_io_sa", "floor_io_local"}
    # Each shape's rounds: every side once a round, and in each place of a round once.
    per_shape = len(SIDES) ** 2
    for shape in (comparison.order[:per_shape], comparison.order[per_shape:]):
        rounds = [shape[index : index + len(SIDES)] for index in range(0, per_shape, len(SIDES))]
        assert all(sorted(one) == sorted(SIDES) for one in rounds)
        for place in range(len(SIDES)):
            assert Counter(one[place] for one in rounds) == Counter(SIDES)
    assert measured["ratios"]["w1_p50_local"] == pytest.approx(0.22 / 0.2)
    assert measured["ratios"]["w4_throughput_local"] > 0 and measured["ratios"]["w4_throughput"] > 0
    assert measured["b3_local"]["W1"]["p50"] == 0.22 and measured["floor_io_local"]["W4"]["p50"] == 0.2
    assert len(measured["b3_local"]["W4"]["throughput_per_round"]) == len(SIDES)
