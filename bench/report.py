"""Markdown tables, JSON and PNG charts from a benchmark's results.

Longer than most modules because every table of one report lives here, so the JSON and the
Markdown cannot drift apart; each table is its own small function.
"""

from __future__ import annotations

import json
import math
import platform
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.b2_sweep import sweep
from bench.breakdown import breakdown_table
from bench.floor_local import LOCAL_SPREAD_ROWS, local_rows
from bench.table1 import NAMES, bar_values, modes_in, pairing_lines, per_workload, spread, table1
from bench.table1_notes import differences

# Issue 57: B3 with regular activities at least as fast as raw Temporal on W4.
W4_THROUGHPUT_TARGET = "≥ 1.0"


def _b3_from_workloads(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    w1, w4 = (results["workloads"][w]["B3"]["summary"] for w in ("W1", "W4"))
    return {
        "W1": {"p50": w1["latency_p50_s"], "p95": w1["latency_p95_s"], "throughput": w1["throughput_runs_per_min"]},
        "W4": {"throughput": w4["throughput_runs_per_min"]},
    }


def cpu_table(floor: dict[str, Any], b3: dict[str, Any]) -> list[str]:
    """CPU ms per run by process in the paired batches (median over rounds); older results lack it."""
    if "cpu_ms_per_run" not in b3.get("W4", {}):
        return []
    roles = [role for role in ("python", "temporal", "s3") if role in b3["W4"]["cpu_ms_per_run"]]
    names = {"python": "bench process (client + workers)", "temporal": "Temporal server", "s3": "S3 store"}
    lines = ["", "| CPU ms per run (paired batches) | W1 B3 | W1 floor | W4 B3 | W4 floor |", "|---|---|---|---|---|"]
    for role in [*roles, "total"]:
        cells = []
        for shape in ("W1", "W4"):
            for side in (b3[shape], floor[shape]):
                spent = side["cpu_ms_per_run"]
                cells.append(sum(spent.values()) if role == "total" else spent.get(role, 0.0))
        label = names.get(role, "total")
        lines.append(f"| {label} | " + " | ".join(f"{value:.1f}" for value in cells) + " |")
    return lines


def _cpu_ms_per_run(shape: dict[str, Any]) -> float:
    spent: dict[str, float] = shape["cpu_ms_per_run"]
    return sum(spent.values())


def floor_table(results: dict[str, Any]) -> str:
    floor, ratios = results["floor"], results["floor"]["ratios"]
    b3 = floor.get("b3") or _b3_from_workloads(results)  # older results: B3 from Table 1's runs
    resume = results["resume"]
    rows = [
        ("W1 latency p50 (s)", b3["W1"]["p50"], floor["W1"]["p50"], ratios["w1_p50"], "≤ 1.4"),
        ("W1 latency p95 (s)", b3["W1"]["p95"], floor["W1"]["p95"], ratios["w1_p95"], ""),
        ("W1 throughput (runs/min)", b3["W1"]["throughput"], floor["W1"]["throughput"], ratios["w1_throughput"], ""),
        (
            "W4 throughput (runs/min)",
            b3["W4"]["throughput"],
            floor["W4"]["throughput"],
            ratios["w4_throughput"],
            W4_THROUGHPUT_TARGET,
        ),
        ("Resume: event → next action started p50 (s)", resume["b3_p50"], resume["bare_p50"], resume["ratio"], "≤ 1.3"),
    ]
    if "cpu_ms_per_run" in b3["W4"]:
        # CPU per run of the whole stack: what throughput is bought with once the cores are
        # saturated, and unlike runs/min not moved by other tenants of a shared machine.
        ours, base = (_cpu_ms_per_run(side["W4"]) for side in (b3, floor))
        rows.insert(4, ("W4 CPU ms per run (whole stack)", ours, base, ours / base, "≤ 1.4"))
    rows[-1:-1] = local_rows(floor)  # after the W4 rows, before resume's; none for older results
    if "b3_done_p50" in resume:  # results written before this row existed lack it
        done = resume["b3_done_p50"]
        rows.append(("Resume: event → run done p50 (s)", done, resume["bare_p50"], done / resume["bare_p50"], ""))
    if "inbox_p50" in resume:
        kept = resume["inbox_p50"]
        label = "Resume, event kept in the inbox: wait begins → next action started p50 (s)"
        rows.append((label, kept, resume["bare_p50"], kept / resume["bare_p50"], ""))
    lines = ["| Measure | DSMO (B3) | Raw Temporal floor | Ratio | Target |", "|---|---|---|---|---|"]
    lines += [
        f"| {label} | {ours:.3f} | {base:.3f} | {ratio:.2f}x | {target} |" for label, ours, base, ratio, target in rows
    ]
    lines += cpu_table(floor, b3)
    lines += breakdown_table(floor)
    lines.append("")
    lines.append("| Artifact size | History bytes of the run |")
    lines.append("|---|---|")
    lines += [f"| {int(size):,} B | {history:,} |" for size, history in results["history_bytes"].items()]
    return "\n".join(lines)


# What the targets are judged on, per repeat of the floor comparison: (label, value, target).
SPREAD_ROWS: tuple[tuple[str, Callable[[dict[str, Any]], float], str], ...] = (
    ("W1 latency p50, B3 / floor", lambda r: r["floor"]["ratios"]["w1_p50"], "≤ 1.4"),
    ("W1 latency p95, B3 / floor", lambda r: r["floor"]["ratios"]["w1_p95"], ""),
    ("W1 throughput, B3 / floor", lambda r: r["floor"]["ratios"]["w1_throughput"], ""),
    ("W4 throughput, B3 / floor", lambda r: r["floor"]["ratios"]["w4_throughput"], W4_THROUGHPUT_TARGET),
    (
        "W4 CPU ms per run, B3 / floor",
        lambda r: _cpu_ms_per_run(r["floor"]["b3"]["W4"]) / _cpu_ms_per_run(r["floor"]["W4"]),
        "≤ 1.4",
    ),
    *LOCAL_SPREAD_ROWS,
    ("Resume p50, B3 / bare signal", lambda r: r["resume"]["ratio"], "≤ 1.3"),
    (
        "Resume p50 from the inbox (wait begins), B3 / bare signal",
        lambda r: r["resume"]["inbox_p50"] / r["resume"]["bare_p50"],
        "",
    ),
    ("W1 latency p50, floor + artifact I/O / floor", lambda r: r["floor"]["io_ratios"]["w1_p50_io"], ""),
    ("W1 latency p50, B3 / (floor + artifact I/O)", lambda r: r["floor"]["io_ratios"]["w1_p50_b3"], "≤ 1.08"),
    ("W4 throughput, floor + artifact I/O / floor", lambda r: r["floor"]["io_ratios"]["w4_throughput_io"], ""),
    ("W4 throughput, B3 / (floor + artifact I/O)", lambda r: r["floor"]["io_ratios"]["w4_throughput_b3"], ""),
    # The side that also sets DSMO's search attributes: what is left is the orchestration's own.
    (
        "W1 latency p50, (floor + I/O + search attributes) / (floor + I/O)",
        lambda r: _side_ratio(r, "floor_io_sa", "floor_io", "W1", "p50"),
        "",
    ),
    (
        "W1 latency p50, B3 / (floor + I/O + search attributes)",
        lambda r: _side_ratio(r, "b3", "floor_io_sa", "W1", "p50"),
        "",
    ),
    (
        "W4 throughput, B3 / (floor + I/O + search attributes)",
        lambda r: _side_ratio(r, "b3", "floor_io_sa", "W4", "throughput"),
        "",
    ),
    (
        "W4 CPU ms per run, B3 / (floor + I/O + search attributes)",
        lambda r: _side_ratio(r, "b3", "floor_io_sa", "W4", "cpu"),
        "",
    ),
)


def _side_ratio(result: dict[str, Any], side: str, reference: str, workload: str, measure: str) -> float:
    """``side``'s ``measure`` ("p50", "throughput" or "cpu", ms per run) over ``reference``'s, both
    from one floor comparison; NaN when either side was not measured (older results)."""
    floor = result["floor"]
    if side not in floor or reference not in floor:
        return math.nan

    def value(name: str) -> float:
        measured = floor[name][workload]
        return _cpu_ms_per_run(measured) if measure == "cpu" else float(measured[measure])

    return value(side) / value(reference)


def meets(value: float, target: str) -> bool | None:
    """Whether ``value`` meets a target written as "≤ x" or "≥ x"; None without a target."""
    if not target:
        return None
    bound = float(target[1:])
    return value <= bound if target.startswith("≤") else value >= bound


def floor_spread(repeats: list[dict[str, Any]]) -> str:
    """The floor ratios of each repeat, their median and range, and how many repeats met each target."""
    count = len(repeats)
    header = " | ".join(f"#{index + 1}" for index in range(count))
    lines = [
        f"| Ratio | {header} | median | range | target | met |",
        "|---|" + "---|" * count + "---|---|---|---|",
    ]
    for label, value_of, target in SPREAD_ROWS:
        values = [value_of(result) for result in repeats]
        if any(math.isnan(value) for value in values):  # a side some repeat did not measure
            continue
        verdicts = [meets(value, target) for value in values]
        met = f"{sum(bool(v) for v in verdicts)} of {count}" if target else ""
        cells = " | ".join(f"{value:.2f}" for value in values)
        lines.append(
            f"| {label} | {cells} | {statistics.median(values):.2f} | "
            f"{min(values):.2f}-{max(values):.2f} | {target} | {met} |"
        )
    return "\n".join(lines)


def table1_markdown(results: dict[str, Any]) -> str:
    """Table 1, where it differs from the paper's, per workload, the pairing and the repetitions."""
    sections = [
        "### Table 1 (W1-W4, originals and replays; 95% intervals, bootstrap over inputs within "
        "each workload; a zero count's bound is the rule of three, 3/n)",
        table1(results),
        "Where these figures differ from the paper's, and why:",
        differences(results),
        "### Per workload",
        per_workload(results),
        "Paired, from what the agents drew:",
        pairing_lines(results),
    ]
    swept = sweep(results)
    if swept:
        sections += ["### B2 at each share of runs that deviate (its decisions logged, replays reuse them)", swept]
    repeated = spread(results)
    if repeated:
        sections += [f"### {len(results['repetitions'])} repetitions, each with its own seed", repeated]
    return "\n\n".join(sections)


def markdown(results: dict[str, Any]) -> str:
    """Every table of a full run: Table 1's, then the floor's."""
    return table1_markdown(results) + "\n\n### Against the raw-Temporal floor (same run)\n\n" + floor_table(results)


def machine() -> str:
    import os

    return f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs"


def file_stamp(started_at: str) -> str:
    """An ISO timestamp as it appears in result file names: 2026-11-22T09:31:29+00:00 -> 20261122T093129."""
    return started_at.replace(":", "").replace("-", "")[:15]


def write(results: dict[str, Any], out_dir: Path, charts_dir: Path | None = None) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = file_stamp(results["started_at"])
    paths = {"json": out_dir / f"bench-{stamp}.json", "latest": out_dir / "latest.json"}
    text = json.dumps(results, indent=2, default=str)
    paths["json"].write_text(text)
    paths["latest"].write_text(text)
    charts = charts_dir or out_dir
    paths.update(draw(results, charts))
    return paths


def draw(results: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    figure, axes = plt.subplots(1, 4, figsize=(16, 3.6), sharey=True)
    for axis, workload in zip(axes, ("W1", "W2", "W3", "W4"), strict=True):
        for mode in modes_in(results["workloads"]):
            values = sorted(results["workloads"][workload][mode]["latencies"])
            if values:
                axis.plot(values, [(i + 1) / len(values) for i in range(len(values))], label=NAMES[mode])
        axis.set_title(f"{workload} latency CDF")
        axis.set_xlabel("seconds")
    axes[0].set_ylabel("fraction of runs")
    axes[-1].legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    paths["latency_cdf"] = out_dir / "latency_cdf.png"
    figure.savefig(paths["latency_cdf"], dpi=110)
    plt.close(figure)

    table = bar_values(results)
    modes = list(table)
    keys = ["success_rate", "sps", "rsr", "duplicates_per_run", "unlinked_per_run", "late_per_run", "dlq_per_run"]
    figure, axis = plt.subplots(figsize=(11, 4))
    width = 0.8 / len(modes)
    for index, mode in enumerate(modes):
        axis.bar(
            [k + (index - (len(modes) - 1) / 2) * width for k in range(len(keys))],
            [table[mode][key] for key in keys],
            width,
            label=NAMES[mode],
        )
    axis.set_xticks(range(len(keys)), ["success", "SPS", "RSR", "dup/run", "unlinked/run", "late/run", "DLQ/run"])
    axis.set_title("Table 1 metrics (W1-W4)")
    axis.legend(fontsize=8)
    figure.tight_layout()
    paths["table1_bars"] = out_dir / "table1_bars.png"
    figure.savefig(paths["table1_bars"], dpi=110)
    plt.close(figure)
    return paths
