"""Table 1 in the paper's layout, from the runs' records: pooled over W1-W4, with 95% intervals.

Every metric is computed over the pooled records of all four workloads (originals and replays);
the interval beside it is the bootstrap over inputs (`bench.confidence`). Throughput is the
runs of all workloads over their summed wall time.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from bench.confidence import bootstrap
from bench.metrics import (
    RunRecord,
    divergence,
    latency,
    per_run,
    rsr,
    sps,
    sps_path,
    success_rate,
    valid_path_rate,
)
from bench.table1_faults import fault_rows

WORKLOADS = ("W1", "W2", "W3", "W4")
MODES = ("B3", "B1", "B1p", "B2")
NAMES = {
    "B3": "DSMO (B3)",
    "B1": "Choreography (B1)",
    "B1p": "Choreography, deduplicated (B1')",
    "B2": "Agent decides (B2)",
}
PAPER_MODES = ("B3", "B1", "B2")  # the paper has no B1'
# The paper's Table 1 (DSMO, choreography, agent decides), printed beside ours.
PAPER = {
    "success_rate": (0.88, 0.89, 0.83),
    "sps": (0.7775, 0.775, 0.56),
    "rsr": (0.8725, 0.8525, 0.855),
    "duplicates_per_run": (0.165, 0.19, 0.22),
    "unlinked_per_run": (0.0, 3.735, 0.96),
    "dlq_per_run": (0.12, 0.11, 0.17),
    "latency_p50_s": (0.241, 0.205, 18.626),
    "latency_p95_s": (0.540, 0.537, 19.296),
    "latency_mean_s": (0.273, 0.252, 17.941),
}
Metric = Callable[[Sequence[RunRecord]], float]
# key, label, format, the metric over records (None: not a per-record metric)
ROWS: list[tuple[str, str, str, Metric | None]] = [
    ("success_rate", "Base success rate (terminal stage completed, nothing dead-lettered)", "{:.3f}", success_rate),
    ("sps", "SPS (the sequence of states: every attempt and its outcome)", "{:.3f}", sps),
    ("sps_path", "SPS over the collapsed path (completions only)", "{:.3f}", sps_path),
    ("rsr", "RSR (replay success rate)", "{:.3f}", rsr),
    ("valid_path_rate", "Valid path rate (collapsed path = the input's trajectory)", "{:.3f}", valid_path_rate),
    ("divergence", "DS (divergence score)", "{:.3f}", divergence),
    ("duplicates_per_run", "Duplicates / run", "{:.3f}", lambda r: per_run(r, "duplicates")),
    (
        "unlinked_per_run",
        "Orphans / run: unlinked (lineage, from what each execution read, not a prefix of the accepted trajectory)",
        "{:.3f}",
        lambda r: per_run(r, "unlinked"),
    ),
    ("late_per_run", "Executions / run started after the run's end", "{:.3f}", lambda r: per_run(r, "late")),
    (
        "orphans_lineage_per_run",
        "Orphan executions / run, unlinked or late",
        "{:.3f}",
        lambda r: per_run(r, "orphans_lineage"),
    ),
    (
        "orphans_per_run",
        "Orphan executions / run, off the trajectory or after the end",
        "{:.3f}",
        lambda r: per_run(r, "orphans"),
    ),
    ("dlq_per_run", "DLQ / run", "{:.3f}", lambda r: per_run(r, "dlq")),
    ("latency_p50_s", "Latency p50 (s)", "{:.3f}", lambda r: latency(r)["p50"]),
    ("latency_p95_s", "Latency p95 (s)", "{:.3f}", lambda r: latency(r)["p95"]),
    ("latency_mean_s", "Latency mean (s)", "{:.3f}", lambda r: latency(r)["mean"]),
    ("events_per_run", "Events / run", "{:.1f}", lambda r: per_run(r, "events")),
    ("bytes_per_run", "Bytes stored / run", "{:,.0f}", lambda r: per_run(r, "bytes_stored")),
    ("throughput_runs_per_min", "Throughput (runs/min)", "{:,.0f}", None),
]
# Counts whose zero gets a one-sided upper bound by the rule of three (3/n) instead of [0, 0].
COUNTS = {
    "duplicates_per_run",
    "unlinked_per_run",
    "late_per_run",
    "orphans_lineage_per_run",
    "orphans_per_run",
    "dlq_per_run",
}
WITHOUT_INTERVAL = {"events_per_run", "bytes_per_run"}  # shown without one: they hardly vary


def modes_in(workloads: dict[str, Any]) -> tuple[str, ...]:
    """The Table 1 modes ``workloads`` holds (results from before B1' existed have no B1p)."""
    return tuple(mode for mode in MODES if any(mode in modes for modes in workloads.values()))


def records_of(results: dict[str, Any], mode: str, workloads: Sequence[str] = WORKLOADS) -> list[RunRecord]:
    """The mode's run records over ``workloads`` (each workload's input ids are its own)."""
    found = []
    for workload in workloads:
        stored = results["workloads"].get(workload, {}).get(mode, {}).get("records", [])
        found += [RunRecord(**record) for record in stored]
    return found


def groups_of(records: Sequence[RunRecord]) -> list[list[RunRecord]]:
    """One group per input: its original and its replays (the bootstrap's unit)."""
    by_input: dict[str, list[RunRecord]] = defaultdict(list)
    for record in records:
        by_input[record.input_id].append(record)
    return list(by_input.values())


def pooled(results: dict[str, Any], *, intervals: bool = True) -> dict[str, dict[str, tuple[float, float, float]]]:
    """mode -> metric -> (value, low, high) over W1-W4.

    The interval is the bootstrap over inputs, stratified by workload (each resample keeps every
    workload's number of inputs); a count that is zero gets the rule of three's one-sided bound
    [0, 3/n] instead, n the runs. Without ``intervals``, every bound is nan.
    """
    table: dict[str, dict[str, tuple[float, float, float]]] = {}
    for mode in modes_in(results["workloads"]):
        records = records_of(results, mode)
        strata = [groups_of(records_of(results, mode, [w])) for w in WORKLOADS if w in results["workloads"]]
        row: dict[str, tuple[float, float, float]] = {}
        for key, _, _, metric in ROWS:
            if metric is None:
                row[key] = (_throughput(results, mode), math.nan, math.nan)
                continue
            value = metric(records)
            if not intervals or key in WITHOUT_INTERVAL:
                row[key] = (value, math.nan, math.nan)
            elif key in COUNTS and value == 0 and records:
                row[key] = (value, 0.0, 3 / len(records))
            else:
                row[key] = (value, *bootstrap(strata, metric))
        table[mode] = row
    return table


def _throughput(results: dict[str, Any], mode: str) -> float:
    """All workloads' runs over their summed wall time, in runs per minute."""
    summaries = [results["workloads"][w][mode]["summary"] for w in WORKLOADS if w in results["workloads"]]
    minutes = sum(s["runs"] / s["throughput_runs_per_min"] for s in summaries if s["throughput_runs_per_min"])
    return sum(s["runs"] for s in summaries) / minutes if minutes else math.nan


def _cell(value: tuple[float, float, float], pattern: str) -> str:
    estimate, low, high = value
    if math.isnan(estimate):
        return "n/a"
    shown = pattern.format(estimate)
    if math.isnan(low):
        return shown
    if estimate == 0 and low == 0 and high > 0:
        return f"{shown} [≤ {pattern.format(high)}]"  # the rule of three's one-sided bound
    return f"{shown} [{pattern.format(low)}, {pattern.format(high)}]"


# What each repetition keeps: the figures whose run-to-run spread the report shows.
SPREAD = (
    "success_rate",
    "sps",
    "dlq_per_run",
    "unlinked_per_run",
    "late_per_run",
    "orphans_lineage_per_run",
    "latency_p50_s",
    "latency_p95_s",
)


def repetition(workloads: dict[str, Any]) -> dict[str, dict[str, float]]:
    """One repetition's pooled figures, mode -> metric -> value (no intervals)."""
    table = pooled({"workloads": workloads}, intervals=False)
    keys = (*SPREAD, "throughput_runs_per_min")
    return {mode: {key: table[mode][key][0] for key in keys} for mode in table}


def spread(results: dict[str, Any]) -> str:
    """Each repetition's pooled figures per mode, and their range: Table 1's run-to-run spread."""
    repeats = results.get("repetitions", [])
    if len(repeats) < 2:
        return ""
    header = " | ".join(f"#{index + 1}" for index in range(len(repeats)))
    lines = [f"| Mode | Metric | {header} | range |", "|---|---|" + "---|" * (len(repeats) + 1)]
    labels = {key: label for key, label, _, _ in ROWS}
    patterns = {key: pattern for key, _, pattern, _ in ROWS}
    for mode in [mode for mode in MODES if all(mode in repeat for repeat in repeats)]:
        for key in (*SPREAD, "throughput_runs_per_min"):
            values = [repeat[mode][key] for repeat in repeats]
            cells = " | ".join(patterns[key].format(value) for value in values)
            span = f"{patterns[key].format(min(values))}-{patterns[key].format(max(values))}"
            lines.append(f"| {NAMES[mode]} | {labels[key]} | {cells} | {span} |")
    return "\n".join(lines)


def table1(results: dict[str, Any]) -> str:
    """Table 1: ours with 95% intervals, the paper's figures beside."""
    table = pooled(results)
    modes = tuple(table)
    runs = {mode: len(records_of(results, mode)) for mode in modes}
    lines = [
        "| Metric | " + " | ".join(f"{NAMES[m]}, n={runs[m]}" for m in modes) + " | paper (B3 / B1 / B2) |",
        "|---|" + "---|" * (len(modes) + 1),
    ]
    for key, label, pattern, _ in ROWS:
        ours = " | ".join(_cell(table[m][key], pattern) for m in modes)
        paper = " / ".join(str(v) for v in PAPER[key]) if key in PAPER else ""
        lines.append(f"| {label} | {ours} | {paper} |")
        if key == "sps_path":
            lines.append(from_record_row(results, modes))
    return "\n".join(lines + fault_rows(results, modes))


def from_record_row(results: dict[str, Any], modes: Sequence[str]) -> str:
    """B3's originals replayed once more from their record (DSMO's replay with every committed
    output reused): the share that took the original's path to the same ending. Only B3 has one."""
    matched = total = 0
    for measured in results["workloads"].values():
        summary = measured.get("B3", {}).get("summary", {})
        count = summary.get("replays_from_record", 0)
        matched, total = matched + round(summary.get("sps_from_record", 0.0) * count), total + count
    cells = " | ".join((f"{matched / total:.3f} ({matched}/{total})" if m == "B3" and total else "—") for m in modes)
    return f"| SPS, replayed from the record (every committed output reused; DSMO only) | {cells} | |"


def per_workload(results: dict[str, Any]) -> str:
    """Each workload and mode: the main metrics, runs, the inputs' checksum and the faults drawn."""
    keys = (
        "success_rate",
        "sps",
        "sps_path",
        "rsr",
        "duplicates_per_run",
        "unlinked_per_run",
        "late_per_run",
        "orphans_per_run",
        "dlq_per_run",
        "latency_p50_s",
    )
    header = (
        "| Workload | Mode | runs | "
        + " | ".join(keys)
        + " | throughput | kills / deaths / server restarts | inputs checksum | faults drawn (keys reached) |"
    )
    lines = [header, "|---|---|---|" + "---|" * (len(keys) + 4)]
    for workload, modes in results["workloads"].items():
        drawn = modes.get("pairing", {})
        for mode in [mode for mode in modes if mode != "pairing"]:
            summary, sums = modes[mode]["summary"], modes[mode].get("checksums", {})
            cells = " | ".join("n/a" if math.isnan(summary.get(k, math.nan)) else f"{summary[k]:.3f}" for k in keys)
            met = modes[mode].get("faults")
            crashes = "" if met is None else f"{met['kills']} / {met['deaths']} / {met['server_restarts']}"
            lines.append(
                f"| {workload} | {mode} | {summary['runs']:.0f} | {cells} | "
                f"{summary['throughput_runs_per_min']:,.0f} | {crashes} | {sums.get('inputs', '-')} | "
                f"{_faults(drawn.get('faults', {}).get(mode, {}))} |"
            )
    return "\n".join(lines)


def pairing_lines(results: dict[str, Any]) -> str:
    """Per workload: the draw keys every mode reached and their faults, and per mode the keys it
    reached, missed (another mode reached them) and met again in one run (checked: one fault a key)."""
    lines = []
    for workload, modes in results["workloads"].items():
        drawn = modes.get("pairing")
        if drawn:
            per_mode = "; ".join(
                f"{mode} reached {drawn['reached'][mode]}, missed {drawn['missed'][mode]}, "
                f"met {drawn['redrawn'][mode]} again in a run"
                for mode in drawn.get("reached", {})
            )
            lines.append(
                f"- {workload}: {drawn['shared']} draws reached by every mode, the same fault in each "
                f"({_faults(drawn['shared_faults'])}); no draw met two faults in any mode or across modes"
                + (f" ({per_mode})." if per_mode else ".")
            )
    return "\n".join(lines)


def _faults(counts: dict[str, int]) -> str:
    """``crash 3, none 120, ...`` in a fixed order."""
    return ", ".join(f"{kind} {counts[kind]}" for kind in sorted(counts)) or "-"


def bar_values(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    """mode -> metric -> value, for the chart."""
    return {mode: {key: value[0] for key, value in row.items()} for mode, row in pooled(results).items()}
