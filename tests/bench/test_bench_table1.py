"""Table 1's pooling on hand-made records: stratified intervals, the rule of three, repetitions."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from bench.metrics import RunRecord, summarize
from bench.table1 import MODES, pooled, repetition, spread, table1
from bench.table1_notes import latency_ratios, retry_text


def records(workload: str, inputs: int, *, failing: int = 0, orphans: int = 0) -> list[RunRecord]:
    """``inputs`` originals with one replay each; the first ``failing`` inputs' runs dead-lettered."""
    made = []
    for index in range(inputs):
        ok = index >= failing
        for replay in (False, True):
            made.append(
                RunRecord(
                    f"{workload}-{index}-{replay}",
                    f"{workload.lower()}-{index}",
                    replay,
                    path=list("ABC") if ok else ["A"],
                    success=ok,
                    latency_s=0.1 + index / 100,
                    dlq=0 if ok else 1,
                    orphans_lineage=orphans,
                    attempts=["A:ok", "B:ok", "C:ok"] if ok else ["A:ok", "B:permanent"],
                )
            )
    return made


def results(b1_orphans: int = 1) -> dict[str, Any]:
    shapes = {"W1": records("W1", 10), "W3": records("W3", 10, failing=5)}
    workloads: dict[str, Any] = {}
    for workload, made in shapes.items():
        workloads[workload] = {}
        for mode in MODES:
            mine = [RunRecord(**{**asdict(r), "orphans_lineage": b1_orphans if mode == "B1" else 0}) for r in made]
            workloads[workload][mode] = {"summary": summarize(mine, 60.0), "records": [asdict(r) for r in mine]}
    return {"workloads": workloads}


def test_a_zero_count_gets_the_rule_of_three_s_bound_and_a_share_its_interval() -> None:
    table = pooled(results())
    # 40 runs, none orphaned in B3: [0, 3/40]
    assert table["B3"]["orphans_lineage_per_run"] == (0.0, 0.0, 3 / 40)
    value, low, high = table["B3"]["success_rate"]
    assert value == 15 / 20 and low < value < high
    assert table["B1"]["orphans_lineage_per_run"] == (1.0, 1.0, 1.0)
    assert "| 0.000 [≤ 0.075] |" in table1(results())


def test_resampling_within_workloads_keeps_their_shares() -> None:
    # Every W1 run succeeds, half of W3's: resampled within each workload, every resample holds
    # ten inputs of each, so the interval stays strictly between W3's share and W1's.
    value, low, high = pooled(results())["B3"]["success_rate"]
    # Pooled, a resample could hold mostly one workload's inputs: its interval was (0.55, 0.95).
    assert 0.6 <= low <= value <= high <= 0.9


def test_repetitions_show_their_spread() -> None:
    first, second = repetition(results()["workloads"]), repetition(results(b1_orphans=3)["workloads"])
    assert first["B1"]["orphans_lineage_per_run"] == 1.0 and second["B1"]["orphans_lineage_per_run"] == 3.0
    assert spread({"repetitions": [first]}) == ""
    text = spread({"repetitions": [first, second]})
    assert "| Choreography (B1) | Orphan executions / run, unlinked or late | 1.000 | 3.000 | 1.000-3.000 |" in text


def test_latency_is_compared_per_kind_of_load_not_pooled() -> None:
    p50 = {"W1": (0.10, 0.05), "W2": (0.12, 0.04), "W4": (0.9, 0.8)}
    workloads = {
        w: {"B3": {"summary": {"latency_p50_s": b3}}, "B1": {"summary": {"latency_p50_s": b1}}}
        for w, (b3, b1) in p50.items()
    }
    text = latency_ratios({"workloads": workloads}, {"w4_inputs": 100, "w4_concurrency": 50}, 0.3, 0.35)
    assert "is 2.0-3.0x B1's in W1-W3** (B3 0.100, 0.120 s against B1 0.050, 0.040 s" in text
    assert "**In W4 it is 1.1x** (0.900 s against 0.800 s): W4 runs 100 inputs 50 at a time" in text
    assert "The pooled medians (0.300 s against 0.350 s) mix" in text
    del workloads["W4"]
    assert "In W4" not in latency_ratios({"workloads": workloads}, {}, 0.3, 0.35)


def test_retry_delays_are_explained_by_the_timer_measured_in_the_run() -> None:
    measured = retry_text({"timer": {"asked_s": 0.2, "fired_s": 1.004, "probes": 5}}, "2.52 s after timeout", "")
    assert "fired a 0.2 s timer after 1.00 s (median of 5, measured in this run)" in measured
    assert "about 1.0 s after a transient failure and 2.5 s after an attempt timed out" in measured
    assert "B1 none" in measured
    assert "measured in this run" not in retry_text({}, "", "")  # results from before the probe existed
