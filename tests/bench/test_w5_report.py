"""W5's tables hold DSMO's async stage against raw Temporal doing the same writes."""

from __future__ import annotations

from bench.studies.w5.w5_report import held_table, w5_table


def _mode(ratio: float) -> dict[str, object]:
    return {
        "completed": 200,
        "runs": 200,
        "model_calls": 200,
        "peak_in_flight": 150,
        "mean_in_flight": 60.0,
        "stage_mean_seconds": 1.07,
        "stage_p95_seconds": 1.1,
        "dispatch_mean_seconds": 0.0,
        "calls_per_second": 57.7,
        "ratio_to_ideal": ratio,
        "ratio_per_batch": [ratio],
        "wall_seconds": 7.0,
        "runs_per_second": 28.0,
        "mean_commit_seconds": 1.4,
        "last_commit_seconds": 1.6,
        "ratio_by_last": 0.6,
    }


def test_the_async_stage_is_divided_by_raw_temporal_with_the_same_writes() -> None:
    modes = {"async (llm stage)": _mode(0.93), "raw Temporal": _mode(0.94), "raw Temporal + the writes": _mode(0.91)}
    table = w5_table({"runs": 200, "modes": modes})
    row = next(line for line in table.splitlines() if "Against raw Temporal + the writes" in line)
    assert row.endswith("| 1.02 | 1.03 | 1.00 |")
    held = held_table({"async (llm stage)": _mode(0.71), "raw Temporal + the writes": _mode(0.73)}, 1.0)
    row = next(line for line in held.splitlines() if "Against raw Temporal + the writes" in line)
    assert row.endswith("| 0.97 | 1.00 |")
    alone = w5_table({"runs": 200, "modes": {"async (llm stage)": _mode(0.9)}})
    assert next(line for line in alone.splitlines() if "Against" in line).endswith("| - |")
