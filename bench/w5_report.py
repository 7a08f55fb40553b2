"""W5's figures: stage timings pooled over batches, the held batch's ratio, and the BENCHMARKS.md
section that shows them beside each other (the batches themselves run in `bench.llm_bound`)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from bench.metrics import percentile


def held_figures(batch: dict[str, Any], runs: int, latency: float, *, mode: str = "async") -> dict[str, Any]:
    """A held batch: all ``runs`` calls in flight at once, answered together after ``latency``.

    From the moment the last call arrived, the ideal is every stage committed ``latency`` later.
    As in the regular batches, the ratio is Little's law's: ``latency`` over the mean time from
    that moment to a stage's output committed; the time to the last one is reported beside it.
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
    }


def pooled(batches: list[dict[str, Any]], runs: int, latency: float) -> dict[str, Any]:
    """One contender's figures over its batches: stage timings pooled, the batch figures' median or total.

    Little's law per batch gives ``runs`` over the batch's mean residence; over the pooled
    stages it is the same with their common mean, and each batch's own ratio shows the spread.
    """
    residence = [seconds for batch in batches for seconds in batch["residence"]]
    dispatch = [seconds for batch in batches for seconds in batch["dispatch"]]
    mean = sum(residence) / len(residence)
    wall = statistics.median(batch["wall_seconds"] for batch in batches)
    return {
        "batches": len(batches),
        "runs": runs * len(batches),
        "completed": sum(batch["completed"] for batch in batches),
        "model_calls": sum(batch["model_calls"] for batch in batches),
        "peak_in_flight": max(batch["peak_in_flight"] for batch in batches),
        "wall_seconds": round(wall, 2),
        "runs_per_second": round(runs / wall, 2),
        "stage_mean_seconds": round(mean, 3),
        "stage_p95_seconds": round(percentile(residence, 95), 3),
        "dispatch_mean_seconds": round(sum(dispatch) / len(dispatch), 3),
        "stage_calls_per_second": round(runs / mean, 1),
        "ideal_calls_per_second": round(runs / latency, 1),
        "ratio_to_ideal": round(latency / mean, 3),
        "ratio_per_batch": [round(latency * len(b["residence"]) / sum(b["residence"]), 3) for b in batches],
    }


def w5_table(w5_results: dict[str, Any]) -> str:
    """The W5 figures as a markdown table, one column per contender."""
    modes = w5_results["modes"]
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("Runs completed", lambda f: f"{f['completed']:,} of {f['runs']:,}"),
        ("Model calls made", lambda f: f"{f['model_calls']:,}"),
        ("Peak model calls in flight (largest of the batches)", lambda f: f"{f['peak_in_flight']:,}"),
        ("LLM stage, mean time scheduled to committed (s)", lambda f: f"{f['stage_mean_seconds']:.3f}"),
        ("LLM stage, p95 (s)", lambda f: f"{f['stage_p95_seconds']:.3f}"),
        ("of which waiting for a worker to start it, mean (s)", lambda f: f"{f['dispatch_mean_seconds']:.3f}"),
        ("LLM stage throughput (calls/s, Little's law)", lambda f: f"{f['stage_calls_per_second']:.1f}"),
        ("Ideal (calls in flight / latency)", lambda f: f"{f['ideal_calls_per_second']:.1f}"),
        ("**Ratio to the ideal** (target async ≥ 0.8)", lambda f: f"{f['ratio_to_ideal']:.2f}"),
        ("Ratio in each batch", lambda f: " / ".join(f"{ratio:.2f}" for ratio in f["ratio_per_batch"])),
        ("From the go signal to the last run's end, median (s)", lambda f: f"{f['wall_seconds']:.1f}"),
        ("Runs ended per second after the go signal", lambda f: f"{f['runs_per_second']:.1f}"),
    ]
    lines = ["| " + " | ".join(["", *modes]) + " |", "|---" * (len(modes) + 1) + "|"]
    for label, cell in rows:
        lines.append("| " + " | ".join([label, *(cell(figures) for figures in modes.values())]) + " |")
    return "\n".join(lines)


def held_table(held: dict[str, Any], latency: float) -> str:
    """The held batch's figures (the async contender only)."""
    runs = held["runs"]
    rows = [
        ("Peak model calls in flight", f"{held['peak_in_flight']:,}"),
        ("Runs completed", f"{held['completed']:,} of {runs:,}"),
        (f"From the {runs}th call's arrival to an output committed, mean (s)", f"{held['mean_commit_seconds']:.3f}"),
        ("... to the last output committed (s)", f"{held['last_commit_seconds']:.3f}"),
        (f"**Ratio to the ideal** ({latency:g} s / the mean; target ≥ 0.8)", f"{held['ratio_to_ideal']:.2f}"),
    ]
    lines = [f"|  | {held['mode']} |", "|---|---|"]
    lines += [f"| {label} | {value} |" for label, value in rows]
    return "\n".join(lines)


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
16 threads, 16 activities). The stage's throughput is Little's law over its stages (calls in
flight over the mean time from the workflow scheduling the stage to its output committed, pooled
over the batches); the ideal is the model's own bound, calls in flight over latency. The
releases themselves queue for the cores (each is a workflow task), so a batch's model calls
overlap less than {runs} at a time; the held batch below has them all in flight together.

{w5_table(w5_results)}
{_held_section(w5_results)}{W5_END}"""


def _held_section(w5_results: dict[str, Any]) -> str:
    held, latency = w5_results.get("held"), w5_results["latency_seconds"]
    if not held:
        return ""
    return f"""
With every call in flight at once: one more batch on the async worker, where the model answers
no call until all {held["runs"]} are waiting, then each {latency:g} s later. The ideal is every
stage committed {latency:g} s after the last call arrived; the ratio is that over the mean time
it took, as above, and the time until the last output shows how long the burst of answers kept
the worker busy.

{held_table(held, latency)}
"""
