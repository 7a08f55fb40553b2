"""The paper's metrics, computed on hand-made runs whose answers are known."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from bench.breakdown import breakdown_table
from bench.metrics import (
    RunRecord,
    divergence,
    percentile,
    rsr,
    sps,
    sps_path,
    success_rate,
    summarize,
    valid_path_rate,
)
from bench.report import floor_spread, meets
from bench.studies.w5.llm_bound import model_stage_timings
from bench.studies.w5.w5_report import held_figures, pooled


def run(input_id: str, replay: bool, path: str, success: bool = True, retried: str = "", **counts: Any) -> RunRecord:
    """A run along ``path``; the stages in ``retried`` failed once (transient) before completing."""
    attempts = [item for stage in path for item in ([f"{stage}:transient"] * (stage in retried) + [f"{stage}:ok"])]
    return RunRecord(
        f"{input_id}-{replay}-{path}-{retried}",
        input_id,
        replay,
        path=list(path),
        success=success,
        attempts=attempts,
        **counts,
    )


RECORDS = [
    run("i1", False, "ABC"),
    run("i1", True, "ABC"),
    run("i1", True, "ABD", success=False),
    run("i2", False, "ACD"),
    run("i2", True, "ACD", retried="C"),  # the same path, but a retry in its sequence of states
    run("i2", True, "ACD", orphans=2, duplicates=1, dlq=1),
]


def test_success_rate_counts_originals_only() -> None:
    assert success_rate(RECORDS) == 1.0


def test_sps_is_the_share_of_replays_with_the_original_s_sequence_of_states() -> None:
    assert sps(RECORDS) == 2 / 4  # the retried replay's sequence differs; its collapsed path does not
    assert sps_path(RECORDS) == 3 / 4
    assert valid_path_rate([run("i1", False, "ABC"), RunRecord("x", "x", False, valid_path=True)]) == 1 / 2


def test_rsr_is_the_share_of_successful_replays() -> None:
    assert rsr(RECORDS) == 3 / 4


def test_divergence_scores_terminal_mismatches() -> None:
    assert divergence(RECORDS) == 1 / 4  # ABD ends at D, its original at C


def test_per_run_counts_and_latency() -> None:
    summary = summarize(RECORDS, wall_seconds=60)
    assert summary["orphans_per_run"] == pytest.approx(2 / 6) and summary["dlq_per_run"] == pytest.approx(1 / 6)
    assert summary["throughput_runs_per_min"] == 6
    assert math.isnan(sps([run("x", False, "A")]))


@pytest.mark.parametrize(("q", "expected"), [(50, 3), (95, 5), (100, 5), (1, 1)])
def test_nearest_rank_percentile(q: float, expected: float) -> None:
    assert percentile([5, 1, 4, 2, 3], q) == expected


def test_cpu_per_run_counts_only_roles_sampled_twice() -> None:
    from bench.cpu import per_run_ms

    before = {"python": 1.0, "temporal": 10.0, "s3": 2.0}
    after = {"python": 1.5, "temporal": 12.0}  # the store went away between the samples
    assert per_run_ms(before, after, 100) == {"python": 5.0, "temporal": 20.0}
    assert per_run_ms(before, after, 0) == {}


def _repeat(w1_p50: float, w4: float, resume: float) -> dict[str, object]:
    shape = {"cpu_ms_per_run": {"python": 10.0, "temporal": 40.0}}

    def side(p50: float, throughput: float, python: float) -> dict[str, object]:
        measured = {"p50": p50, "throughput": throughput, "cpu_ms_per_run": {"python": python, "temporal": 50.0}}
        return {"W1": measured, "W4": measured}

    return {
        "floor": {
            "ratios": {"w1_p50": w1_p50, "w1_p95": 1.2, "w1_throughput": 0.8, "w4_throughput": w4},
            "W4": shape,
            "b3": side(0.150, 1400, 25.0),
            "floor_io": side(0.125, 1700, 15.0),
            "floor_io_sa": side(0.130, 1600, 17.5),
            "io_ratios": {"w1_p50_io": 1.3, "w1_p50_b3": 1.1, "w4_throughput_io": 0.8, "w4_throughput_b3": 0.9},
        },
        "resume": {"ratio": resume, "inbox_p50": 0.02, "bare_p50": 0.04},
    }


def test_meets_reads_the_targets_direction() -> None:
    assert meets(1.5, "≤ 1.5") and not meets(1.51, "≤ 1.5")
    assert meets(0.7, "≥ 0.7") and not meets(0.69, "≥ 0.7")
    assert meets(3.0, "") is None


def test_floor_spread_reports_each_repeat_median_range_and_targets_met() -> None:
    table = floor_spread([_repeat(1.4, 0.82, 1.1), _repeat(1.6, 0.68, 1.2), _repeat(1.35, 0.85, 1.4)])
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()}
    assert rows["W1 latency p50, B3 / floor"].endswith("| 1.40 | 1.60 | 1.35 | 1.40 | 1.35-1.60 | ≤ 1.4 | 2 of 3 |")
    # Issue 57's target: B3 with regular activities at least as fast as raw Temporal.
    assert rows["W4 throughput, B3 / floor"].endswith("| 0.82 | 0.68 | 0.85 | 0.82 | 0.68-0.85 | ≥ 1.0 | 0 of 3 |")
    assert rows["Resume p50, B3 / bare signal"].endswith("| 1.10 | 1.20 | 1.40 | 1.20 | 1.10-1.40 | ≤ 1.3 | 2 of 3 |")
    assert rows["Resume p50 from the inbox (wait begins), B3 / bare signal"].endswith("| 0.50 | 0.50-0.50 |  |  |")
    # CPU per run: floor 50 ms, B3 75 ms -> 1.50x, over the ≤ 1.4 target every time
    assert rows["W4 CPU ms per run, B3 / floor"].endswith("| 1.50 | 1.50 | 1.50 | 1.50 | 1.50-1.50 | ≤ 1.4 | 0 of 3 |")
    assert rows["W1 latency p50, B3 / (floor + artifact I/O)"].endswith("| 1.10 | 1.10-1.10 | ≤ 1.08 | 0 of 3 |")
    assert rows["W4 throughput, B3 / (floor + artifact I/O)"].endswith(
        "| 0.90 | 0.90 | 0.90 | 0.90 | 0.90-0.90 |  |  |"
    )
    # The search attributes' own share, then what is left to the orchestration (75 / 67.5 ms of CPU).
    assert rows["W1 latency p50, (floor + I/O + search attributes) / (floor + I/O)"].endswith(
        "| 1.04 | 1.04-1.04 |  |  |"
    )
    assert rows["W1 latency p50, B3 / (floor + I/O + search attributes)"].endswith("| 1.15 | 1.15-1.15 |  |  |")
    assert rows["W4 throughput, B3 / (floor + I/O + search attributes)"].endswith("| 0.88 | 0.88-0.88 |  |  |")
    assert rows["W4 CPU ms per run, B3 / (floor + I/O + search attributes)"].endswith("| 1.11 | 1.11-1.11 |  |  |")


def test_breakdown_puts_b3_beside_both_floors() -> None:
    def side(p50: float, rate: float, python: float, temporal: float, s3: float) -> dict[str, object]:
        cpu = {"python": python, "temporal": temporal, "s3": s3}
        return {"W1": {"p50": p50}, "W4": {"throughput": rate, "cpu_ms_per_run": cpu}}

    floor = {
        **side(0.100, 2000, 10.0, 30.0, 0.0),
        "floor_io": side(0.130, 1600, 14.0, 31.0, 9.0),
        "b3": side(0.150, 1400, 20.0, 35.0, 9.0),
        "io_ratios": {"w1_p50_io": 1.3, "w1_p50_b3": 150 / 130, "w4_throughput_io": 0.8, "w4_throughput_b3": 0.875},
    }
    rows = {line.split(" | ")[0].lstrip("| "): line for line in breakdown_table(floor) if line.startswith("|")}
    assert rows["W1 latency p50 (s)"] == "| W1 latency p50 (s) | 0.100 | 0.130 | 0.150 | 1.30x | 1.15x |"
    assert rows["W4 throughput (runs/min)"] == "| W4 throughput (runs/min) | 2,000 | 1,600 | 1,400 | 0.80x | 0.88x |"
    # whole stack: 40 -> 54 -> 64 ms per run
    assert rows["W4 CPU ms per run, whole stack"].endswith("| 40.0 | 54.0 | 64.0 | 1.35x | 1.19x |")
    assert rows["W4 CPU ms per run, S3 store"] == "| W4 CPU ms per run, S3 store | 0.0 | 9.0 | 9.0 |  |  |"
    # results written before the artifact-I/O floor existed: no table
    assert breakdown_table({"b3": floor["b3"]}) == []


def test_breakdown_tells_the_search_attributes_apart_when_measured() -> None:
    def side(p50: float, rate: float, temporal: float) -> dict[str, object]:
        return {
            "W1": {"p50": p50},
            "W4": {"throughput": rate, "cpu_ms_per_run": {"python": 10.0, "temporal": temporal}},
        }

    floor = {
        **side(0.100, 2000, 30.0),
        "floor_io": side(0.130, 1600, 40.0),
        "floor_io_sa": side(0.140, 1500, 45.0),
        "b3": side(0.150, 1400, 54.0),
        "io_ratios": {
            "w1_p50_io": 1.3,
            "w1_p50_b3": 150 / 130,
            "w4_throughput_io": 0.8,
            "w4_throughput_b3": 0.875,
            "w1_p50_sa": 140 / 130,
            "w1_p50_b3_sa": 150 / 140,
            "w4_throughput_sa": 1500 / 1600,
            "w4_throughput_b3_sa": 1400 / 1500,
        },
    }
    lines = breakdown_table(floor)
    assert "| Floor + I/O + search attributes | DSMO (B3) | I/O / floor | SA / (floor + I/O) |" in lines[1]
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("|")}
    assert rows["W1 latency p50 (s)"].endswith("| 0.100 | 0.130 | 0.140 | 0.150 | 1.30x | 1.08x | 1.07x | 1.15x |")
    # whole stack: 40 -> 50 -> 55 -> 64 ms; the steps, then B3 over the floor + I/O
    assert rows["W4 CPU ms per run, whole stack"].endswith(
        "| 40.0 | 50.0 | 55.0 | 64.0 | 1.25x | 1.10x | 1.16x | 1.28x |"
    )
    assert rows["W4 CPU ms per run, Temporal server"].endswith("| 30.0 | 40.0 | 45.0 | 54.0 |  |  |  |  |")
    assert all(line.count("|") == lines[1].count("|") for line in lines[1:])


def w5_batch(
    completed: int, calls: int, peak: int, wall: float, residence: list[float], dispatch: list[float]
) -> dict[str, Any]:
    # Every stage scheduled at 10 s and completed after its residence.
    return {
        "completed": completed,
        "model_calls": calls,
        "peak_in_flight": peak,
        "wall_seconds": wall,
        "residence": residence,
        "dispatch": dispatch,
        "scheduled": [10.0] * len(residence),
        "commits": [10.0 + seconds for seconds in residence],
    }


def test_w5_pools_the_stages_of_every_batch_and_keeps_each_batch_ratio() -> None:
    batches = [
        w5_batch(2, 2, 2, 3.0, [1.0, 1.5], [0.1, 0.3]),
        w5_batch(2, 3, 1, 5.0, [2.0, 2.0], [0.5, 0.5]),
        w5_batch(1, 2, 2, 4.0, [1.25, 1.25], [0.0, 0.2]),
    ]
    figures = pooled(batches, runs=2, latency=1.0)
    assert figures["runs"] == 6 and figures["completed"] == 5 and figures["model_calls"] == 7
    assert figures["peak_in_flight"] == 2 and figures["wall_seconds"] == 4.0 and figures["runs_per_second"] == 0.5
    # Little's law over the pooled stages: the mean residence is 9 s / 6 = 1.5 s.
    assert figures["stage_mean_seconds"] == 1.5 and figures["ratio_to_ideal"] == round(1 / 1.5, 3)
    assert figures["ideal_calls_per_second"] == 2.0 and figures["dispatch_mean_seconds"] == 0.267
    assert figures["ratio_per_batch"] == [0.8, 0.5, 0.8]
    # Windows of 1.5, 2 and 1.25 s: 1.33, 1 and 1.6 calls per second, the median 1.33; the calls in
    # flight on average 1.67, 2 and 2, the median 2; against both runs in flight, 1.33 of 2 per second.
    assert figures["calls_per_second"] == 1.3 and figures["mean_in_flight"] == 2.0
    assert figures["ratio_all_in_flight"] == round((2 / 1.5) / 2, 3)


def test_w5_a_batch_whose_stages_overlap_little_is_far_from_all_in_flight() -> None:
    # Two 1 s stages, one after the other: each took only the latency, but only one was in flight.
    batch = {**w5_batch(2, 2, 1, 2.5, [1.0, 1.0], [0.0, 0.0]), "scheduled": [0.0, 1.0], "commits": [1.0, 2.0]}
    figures = pooled([batch], runs=2, latency=1.0)
    assert figures["ratio_to_ideal"] == 1.0 and figures["mean_in_flight"] == 1.0
    assert figures["calls_per_second"] == 1.0 and figures["ratio_all_in_flight"] == 0.5


def test_w5_held_batch_ratio_is_the_latency_over_the_mean_time_to_a_commit() -> None:
    commits = [101.0, 101.25, 101.25, 101.5]
    batch = {"completed": 4, "peak_in_flight": 4, "released_at": 100.0, "commits": commits}
    figures = held_figures(batch, runs=4, latency=1.0)
    assert figures["released"] and figures["mean_commit_seconds"] == 1.25 and figures["ratio_to_ideal"] == 0.8
    assert figures["last_commit_seconds"] == 1.5 and figures["ratio_by_last"] == round(1 / 1.5, 3)
    # A server that gave up holding (fewer in flight than the batch) is reported as not released.
    assert not held_figures({**batch, "peak_in_flight": 3}, runs=4, latency=1.0)["released"]
    never = held_figures({**batch, "released_at": None}, runs=4, latency=1.0)
    assert not never["released"] and never["ratio_to_ideal"] == 0.0


def _event(event_id: int, kind: int, at: float, scheduled: int | None = None) -> HistoryEvent:
    event = HistoryEvent(event_id=event_id, event_type=kind)  # type: ignore[arg-type]
    event.event_time.FromDatetime(datetime.fromtimestamp(at, tz=UTC))
    if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
        event.activity_task_started_event_attributes.scheduled_event_id = scheduled or 0
    if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        event.activity_task_completed_event_attributes.scheduled_event_id = scheduled or 0
    return event


def test_w5_times_the_first_activity_after_the_go_signal_from_the_history() -> None:
    events = [
        _event(1, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, 1.0),
        _event(2, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, 1.5),  # the first stage: not it
        _event(3, EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED, 1.6, scheduled=2),
        _event(4, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, 1.7, scheduled=2),
        _event(5, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, 9.0),
        _event(6, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, 10.0),
        _event(7, EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED, 10.25, scheduled=6),
        _event(8, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, 11.5, scheduled=6),
        _event(9, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, 11.75),
        _event(10, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, 12.0),
    ]
    assert model_stage_timings(events) == (10.0, 10.25, 11.5, 12.0)


def test_w5_a_run_whose_model_stage_never_completed_is_named_not_timed() -> None:
    signalled = _event(1, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, 1.0)
    scheduled = _event(2, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, 1.5)
    failed = _event(3, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, 2.0)
    with pytest.raises(ValueError, match="no go signal"):
        model_stage_timings([scheduled, failed])
    with pytest.raises(ValueError, match="no model stage scheduled"):
        model_stage_timings([signalled, failed])
    with pytest.raises(ValueError, match="did not complete"):
        model_stage_timings(
            [signalled, scheduled, _event(3, EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED, 1.6, 2), failed]
        )
