"""The migration section of BENCHMARKS.md, and its JSON files (the figures and the batch report)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.report import file_stamp, meets

START, END = "<!-- migration:start -->", "<!-- migration:end -->"
TARGET = "≥ 0.5"  # runs moved per second, DSMO over the bare update (issue 37)


def save(figures: dict[str, Any], out_dir: Path, started_at: str) -> dict[str, Path]:
    """Write the section's figures and the batch's own report beside the other results.

    The batch report (one outcome per run) is kept apart: at 10,000 runs it is larger than
    every other result together.

    Returns:
        The paths: ``{"json": figures, "batch": the batch report}``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = file_stamp(started_at)
    paths = {"json": out_dir / f"migration-{stamp}.json", "batch": out_dir / f"migration-batch-{stamp}.json"}
    kept = {key: value for key, value in figures.items() if key != "batch_report"}
    paths["json"].write_text(json.dumps(kept | {"batch_report_file": paths["batch"].name}, indent=2, default=str))
    paths["batch"].write_text(json.dumps(figures.get("batch_report", {}), indent=2, default=str))
    return paths


def _row(label: str, ours: float, base: float, *, digits: int = 3, target: str = "") -> str:
    ratio = f"{ours / base:.2f}x" if base else ""
    return f"| {label} | {ours:,.{digits}f} | {base:,.{digits}f} | {ratio} | {target} |"


def table(figures: dict[str, Any]) -> str:
    """DSMO's batch beside the bare updates: rate, latency, worker memory and CPU, history growth."""
    ours, base = figures["dsmo"], figures["bare"]
    rss_ours, rss_base = ours["worker_rss_mb"], base["worker_rss_mb"]
    history_ours, history_base = ours["history"], base["history"]
    verdict = meets(figures["ratio"], TARGET)
    lines = [
        "| Measure | DSMO (`migrate`) | Bare Temporal update | Ratio | Target |",
        "|---|---|---|---|---|",
        _row("Runs moved per second", ours["runs_per_second"], base["runs_per_second"], digits=1, target=TARGET),
        _row("Per-run latency p50, update sent → answer (s)", ours["latency_p50_s"], base["latency_p50_s"]),
        _row("Per-run latency p95 (s)", ours["latency_p95_s"], base["latency_p95_s"]),
        _row("Worker RSS before the batch (MB)", rss_ours["before"], rss_base["before"], digits=0),
        _row("Worker RSS, peak during the batch (MB)", rss_ours["peak"], rss_base["peak"], digits=0),
        _row("Worker RSS after the batch (MB)", rss_ours["after"], rss_base["after"], digits=0),
    ]
    names = {"worker": "worker", "temporal": "Temporal server", "s3": "S3 store", "python": "bench process (client)"}
    for role, name in names.items():
        if role in ours["cpu_ms_per_run"] and role in base["cpu_ms_per_run"]:
            label = f"CPU ms per moved run, {name}"
            lines.append(_row(label, ours["cpu_ms_per_run"][role], base["cpu_ms_per_run"][role], digits=1))
    lines += [
        _row(
            "History events the move adds to the old generation",
            history_ours["old_generation_events_added"],
            history_base["old_generation_events_added"],
            digits=1,
        ),
        _row(
            "History bytes the move adds to the old generation",
            history_ours["old_generation_bytes_added"],
            history_base["old_generation_bytes_added"],
            digits=0,
        ),
        _row(
            "New generation after its first workflow task: events",
            history_ours["new_generation_events"],
            history_base["new_generation_events"],
            digits=1,
        ),
        _row(
            "New generation after its first workflow task: bytes",
            history_ours["new_generation_bytes"],
            history_base["new_generation_bytes"],
            digits=0,
        ),
        f"| Runs moved (visibility: on version 2 and waiting / continued as new) | "
        f"{ours['moved_visible']:,} of {figures['runs']:,} | {base['moved_visible']:,} of {figures['runs']:,} | | "
        f"all |",
        f"| Refused / failed | {ours['summary']['refused']} / {ours['summary']['failed']} | "
        f"0 / {base['summary']['failed']} | | 0 / 0 |",
    ]
    met = "met" if verdict else "not met"
    lines.append("")
    lines.append(f"Rate ratio {figures['ratio']:.2f}x against a target of {TARGET}: {met}.{_load(figures)}")
    return "\n".join(lines)


def _before(figures: dict[str, Any]) -> str:
    before = figures.get("seconds_before_batches")
    return f", {before} s of it starting both sides' runs" if before is not None else ""


def _load(figures: dict[str, Any]) -> str:
    load = figures.get("load_average")
    if not load:
        return ""
    return (
        f" The machine's load average (1 min, 2 cores shared with other jobs) was {load['before'][0]:.1f} "
        f"as the batches began and {load['after'][0]:.1f} as they ended."
    )


def section(figures: dict[str, Any], command: str, started_at: str, machine: str, note: str = "") -> str:
    """The BENCHMARKS.md section, between its markers."""
    runs = figures["runs"]
    return f"""{START}
## Migrating waiting runs to a new version

Measured by `{command}` on {started_at} ({figures["seconds"]} s{_before(figures)}), on {machine}{note}.
{runs:,} runs of a version-1 definition wait for a reply on one worker process; version 2
(the message after the wait corrected) is published and all {runs:,} are migrated in one batch by
`DsmoClient.migrate` (what `dsmo runs migrate` runs: the runs selected through visibility,
{figures["concurrency"]} at a time), each through the run's validated `migrate` update (the run
continues as new on version 2 and its new generation records `RUN_MIGRATED`). The reference,
in the same run on the same machine, is the bare Temporal equivalent of a move: {runs:,} plain
workflows waiting on a condition on their own worker process (no sandbox, the same workflow-task
slots), each sent one update ({figures["request_bytes"]:,} B, the size of DSMO's request)
whose handler makes it continue as new carrying a {figures["checkpoint_bytes"]:,} B state
blob (the size of DSMO's checkpoint, read from a moved run's history), at the same concurrency,
in two halves, one before DSMO's batch and one after it, so that both sides meet the same load.
Latency is timed per update by the same client interceptor on both sides (sent until the answer
is back); RSS is the worker's, sampled every 0.2 s; CPU is per moved run by process; history
growth is read from Temporal for {figures["dsmo"]["history"]["sampled"]} runs spread over each
batch. The batch's JSON report (one outcome per run) is written to
`bench/results/migration-batch-*.json`.

{table(figures)}
{END}"""
