"""W5's figures: stage timings pooled over batches, the held batch's ratio, and the BENCHMARKS.md
section that shows them beside each other (the batches themselves run in `bench.studies.w5.llm_bound`)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from bench.metrics import percentile


def held_figures(batch: dict[str, Any], runs: int, latency: float, *, mode: str = "async") -> dict[str, Any]:
    """A held batch: all ``runs`` calls in flight at once, answered together after ``latency``.

    From the moment the last call arrived, the ideal is every stage completed ``latency`` later.
    As in the regular batches, the ratio is Little's law's: ``latency`` over the mean time from
    that moment to a stage's completion. By the last one instead, it is the calls completed per
    second against all ``runs`` in flight, ``latency`` over the time to the last completion.
    """
    released = batch["released_at"]
    if released is None:
        mean = last = float("inf")
    else:
        mean = sum(commit - released for commit in batch["commits"]) / len(batch["commits"])
        last = max(batch["commits"]) - released
    return {
        "mode": mode,
        "runs": runs,
        "completed": batch["completed"],
        "peak_in_flight": batch["peak_in_flight"],
        "released": released is not None and batch["peak_in_flight"] >= runs,
        "mean_commit_seconds": round(mean, 3),
        "last_commit_seconds": round(last, 3),
        "ratio_to_ideal": round(latency / mean, 3),
        "ratio_by_last": round(latency / last, 3),
    }


def pooled(batches: list[dict[str, Any]], runs: int, latency: float) -> dict[str, Any]:
    """One contender's figures over its batches: stage timings pooled, the batch figures' median or total.

    A batch's window runs from its first model stage scheduled to its last completed: the calls
    completed per second are the stages over the window, the mean stages in flight (queued or
    calling) the stages' total time over it. With C in flight on average, the ideal is
    C/latency calls per second; by Little's law the ratio to it is ``latency`` over the mean
    stage time, pooled here and per batch. Against all ``runs`` in flight at once, the ideal is
    ``runs``/latency.
    """
    residence = [seconds for batch in batches for seconds in batch["residence"]]
    dispatch = [seconds for batch in batches for seconds in batch["dispatch"]]
    mean = sum(residence) / len(residence)
    windows = [max(batch["commits"]) - min(batch["scheduled"]) for batch in batches]
    per_second = statistics.median(len(b["residence"]) / window for b, window in zip(batches, windows, strict=True))
    in_flight = statistics.median(sum(b["residence"]) / window for b, window in zip(batches, windows, strict=True))
    wall = statistics.median(batch["wall_seconds"] for batch in batches)
    return {
        "batches": len(batches),
        "runs": runs * len(batches),
        "completed": sum(batch["completed"] for batch in batches),
        "model_calls": sum(batch["model_calls"] for batch in batches),
        "peak_in_flight": max(batch["peak_in_flight"] for batch in batches),
        "mean_in_flight": round(in_flight, 1),
        "wall_seconds": round(wall, 2),
        "runs_per_second": round(runs / wall, 2),
        "stage_mean_seconds": round(mean, 3),
        "stage_p95_seconds": round(percentile(residence, 95), 3),
        "dispatch_mean_seconds": round(sum(dispatch) / len(dispatch), 3),
        "calls_per_second": round(per_second, 1),
        "ideal_calls_per_second": round(runs / latency, 1),
        "ratio_to_ideal": round(latency / mean, 3),
        "ratio_per_batch": [round(latency * len(b["residence"]) / sum(b["residence"]), 3) for b in batches],
        "ratio_all_in_flight": round(per_second * latency / runs, 3),
    }


Row = tuple[str, Callable[[dict[str, Any]], str]]


def _table(columns: dict[str, dict[str, Any]], rows: list[Row]) -> str:
    lines = ["| " + " | ".join(["", *columns]) + " |", "|---" * (len(columns) + 1) + "|"]
    for label, cell in rows:
        lines.append("| " + " | ".join([label, *(cell(figures) for figures in columns.values())]) + " |")
    return "\n".join(lines)


def w5_table(w5_results: dict[str, Any]) -> str:
    """The W5 figures as a markdown table, one column per contender."""
    runs = w5_results["runs"]
    rows: list[Row] = [
        ("Runs completed", lambda f: f"{f['completed']:,} of {f['runs']:,}"),
        ("Model calls made", lambda f: f"{f['model_calls']:,}"),
        ("Model calls in flight, peak (largest of the batches)", lambda f: f"{f['peak_in_flight']:,}"),
        ("Model stages in flight (queued ones too), mean over a batch", lambda f: f"{f['mean_in_flight']:.0f}"),
        ("Model stage, mean time scheduled to completed (s)", lambda f: f"{f['stage_mean_seconds']:.3f}"),
        ("Model stage, p95 (s)", lambda f: f"{f['stage_p95_seconds']:.3f}"),
        ("of which queued in Temporal until a worker took it, mean (s)", _figure("dispatch_mean_seconds", 3)),
        ("Model calls completed per second over a batch", lambda f: f"{f['calls_per_second']:.1f}"),
        (
            "**Ratio to the ideal at the calls in flight** (latency / mean stage time; target async ≥ 0.8)",
            lambda f: f"{f['ratio_to_ideal']:.2f}",
        ),
        ("... in each batch", lambda f: " / ".join(f"{ratio:.2f}" for ratio in f["ratio_per_batch"])),
        _against_writes(w5_results["modes"]),
        (f"Ratio to all {runs} in flight (calls per second / {runs} per latency)", _all_in_flight),
        ("From the go signal to the last run's end, median (s)", lambda f: f"{f['wall_seconds']:.1f}"),
        ("Runs ended per second after the go signal", lambda f: f"{f['runs_per_second']:.1f}"),
    ]
    return _table(w5_results["modes"], rows)


# The reference DSMO's async stage is held to: the same shape and store writes on raw Temporal.
WRITES_REFERENCE = "raw Temporal + the writes"


def _against_writes(columns: dict[str, dict[str, Any]]) -> Row:
    """Each column's ratio to the ideal over raw Temporal + the writes' (the same work without DSMO)."""
    reference = columns.get(WRITES_REFERENCE)

    def cell(figures: dict[str, Any]) -> str:
        if reference is None or figures is reference:
            return "-" if reference is None else "1.00"
        return f"{figures['ratio_to_ideal'] / reference['ratio_to_ideal']:.2f}"

    return ("**Against raw Temporal + the writes** (the ratios above divided; target async ≥ 0.95)", cell)


def _all_in_flight(figures: dict[str, Any]) -> str:
    return f"{figures['ratio_all_in_flight']:.2f}" if "ratio_all_in_flight" in figures else "-"


def _figure(key: str, places: int) -> Callable[[dict[str, Any]], str]:
    return lambda figures: f"{figures[key]:.{places}f}"


def held_table(held: dict[str, dict[str, Any]], latency: float) -> str:
    """The held batches' figures, one column per contender that ran one."""
    runs = next(iter(held.values()))["runs"]
    rows: list[Row] = [
        ("Peak model calls in flight", lambda f: f"{f['peak_in_flight']:,}"),
        ("Runs completed", lambda f: f"{f['completed']:,} of {f['runs']:,}"),
        (
            f"From the {runs}th call's arrival to a stage completed, mean (s)",
            lambda f: f"{f['mean_commit_seconds']:.3f}",
        ),
        ("... to the last stage completed (s)", lambda f: f"{f['last_commit_seconds']:.3f}"),
        (
            f"**Ratio to the ideal** ({latency:g} s / the mean; target async ≥ 0.8)",
            lambda f: f"{f['ratio_to_ideal']:.2f}",
        ),
        (f"Ratio by the last ({latency:g} s / the time to the last)", lambda f: f"{f['ratio_by_last']:.2f}"),
        _against_writes(held),
    ]
    return _table(held, rows)


W5_START, W5_END = "<!-- w5:start -->", "<!-- w5:end -->"


def w5_section(w5_results: dict[str, Any], command: str, started_at: str, machine: str) -> str:
    """The BENCHMARKS.md section, between its markers (so `--w5-only --update` can replace it alone)."""
    runs, batches = w5_results["runs"], w5_results.get("batches", 1)
    return f"""{W5_START}
## W5: LLM-bound stages

Measured by `{command}` on {started_at}, on {machine}. Batches of {runs} runs of
extract -> (wait) -> classify -> finish on one fresh worker, where classify waits
{w5_results["latency_seconds"]:g} s on a local OpenAI-compatible server (`bench/llm_server.py`, its own
process); {batches} batches per contender, alternated. The runs start, wait at a gate until all
have started, and one signal each releases them at once. **async** is an `llm` stage (the call
awaits on the worker's event loop; `DSMO_MAX_CONCURRENT_ACTIVITIES=256`); **thread pool** is a
plain agent making the same call with a blocking client on the processor threads (the defaults:
16 threads, 16 activities). Two references run the same shape without DSMO (`bench/studies/w5/llm_floor.py`):
**raw Temporal**, a plain workflow whose model call is an async activity through the same HTTP
clients, and **raw Temporal + the writes**, the same plus the two store writes an `llm` stage
makes after its answer (the call's record and the output). Every time is from Temporal's history:
the model stage from scheduled to completed (a worker with a free slot gets its stage in the reply
to the workflow task that scheduled it, so it queues in Temporal for nothing). With C model
stages in flight on average (queued ones too), the ideal is C per latency calls per second, and
the ratio to it is the latency over the mean stage time (Little's law); the releases queue for
the two cores (each is a workflow task), so fewer than {runs} calls are in flight at a time, and
the ratio against all {runs} is beside it.

{w5_table(w5_results)}
{_held_section(w5_results)}{W5_END}"""


def _held_section(w5_results: dict[str, Any]) -> str:
    held, latency = w5_results.get("held"), w5_results["latency_seconds"]
    if not held:
        return ""
    runs = w5_results["runs"]
    return f"""
With every call in flight at once: one more batch per contender that can hold them all, where
the model answers no call until all {runs} are waiting, then each {latency:g} s later. The ideal is
every stage completed {latency:g} s after the last call arrived; the ratio is that over the mean
time it took, as above, and by the last stage completed it is the calls per second against all
{runs} in flight.

{held_table(held, latency)}
"""
