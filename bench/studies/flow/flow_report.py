"""The flow-control section of BENCHMARKS.md and its JSON file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.report import file_stamp

START, END = "<!-- flow-control:start -->", "<!-- flow-control:end -->"
ROLES = {"python": "bench process (client and workers)", "temporal": "Temporal server", "s3": "S3 store"}


def save(figures: dict[str, Any], out_dir: Path, started_at: str) -> Path:
    """Write the section's figures beside the other results; the file's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"flow-control-{file_stamp(started_at)}.json"
    path.write_text(json.dumps(figures, indent=2, default=str))
    return path


def _row(label: str, keyed: float, plain: float, *, digits: int = 1) -> str:
    ratio = f"{keyed / plain:.2f}x" if plain else ""
    return f"| {label} | {keyed:,.{digits}f} | {plain:,.{digits}f} | {ratio} |"


def _ms(seconds: float | None) -> float:
    return (seconds or 0.0) * 1000


def _statuses(counts: dict[str, int]) -> str:
    return ", ".join(f"{count:,} {status}" for status, count in sorted(counts.items())) or "none"


def throughput_table(figures: dict[str, Any]) -> str:
    """Keyed beside plain: runs per second, CPU per run, start-to-running latency."""
    throughput, latency = figures["throughput"], figures["latency"]
    keyed, plain = throughput["keyed"], throughput["plain"]
    lines = [
        "| Measure | Keyed (limit 1, a key per run) | Plain (no key) | Ratio |",
        "|---|---|---|---|",
        f"| Runs per second (median of {throughput['rounds']} rounds) | {keyed['runs_per_second']:,.2f} | "
        f"{plain['runs_per_second']:,.2f} | {throughput['ratio']:.2f}x (median of the rounds' ratios) |",
        f"| Runs per second, each round | {' / '.join(f'{r:.1f}' for r in keyed['runs_per_second_per_round'])} | "
        f"{' / '.join(f'{r:.1f}' for r in plain['runs_per_second_per_round'])} | |",
    ]
    for role, name in ROLES.items():
        if role in keyed["cpu_ms_per_run"] and role in plain["cpu_ms_per_run"]:
            lines.append(_row(f"CPU ms per run, {name}", keyed["cpu_ms_per_run"][role], plain["cpu_ms_per_run"][role]))
    for percentile in ("p50", "p95"):
        ours, base = latency["keyed"]["to_first_agent"], latency["plain"]["to_first_agent"]
        if percentile in ours and percentile in base:
            label = f"Start call to first stage's agent, {percentile} (ms)"
            lines.append(_row(label, _ms(ours[percentile]), _ms(base[percentile]), digits=0))
    for kind in ("SLOT_TAKEN", "STAGE_STARTED"):
        ours = latency["keyed"]["trail_sample"].get(kind, {})
        base = latency["plain"]["trail_sample"].get(kind, {})
        if "p50" in ours:
            other = f"{_ms(base['p50']):,.0f}" if "p50" in base else "(no slot)"
            label = f"Start call to trail's {kind}, p50 of {ours['runs']} runs (ms)"
            lines.append(f"| {label} | {_ms(ours['p50']):,.0f} | {other} | |")
    lines.append(
        f"| Runs that completed / started running at once | {_statuses(keyed['statuses'])} / "
        f"{_statuses(keyed['started_as'])} | {_statuses(plain['statuses'])} / {_statuses(plain['started_as'])} | |"
    )
    return "\n".join(lines)


def _errors(counts: dict[str, int]) -> str:
    return "; ".join(f"{count:,}: {error}" for error, count in sorted(counts.items())) or "none"


def _cpu(figures: dict[str, Any]) -> str:
    cpu = figures["cpu_ms_per_start"]
    return ", ".join(f"{name.split(' (')[0]} {cpu[role]:,.1f}" for role, name in ROLES.items() if role in cpu)


def lock_table(figures: dict[str, Any]) -> str:
    """One lock: its ceiling (no start waits) beside a lock per start; its handover rate (limit 1)."""
    ceiling, handover = figures["ceiling"], figures["handover"]
    one, spread = ceiling["one_lock"], ceiling["lock_per_start"]
    lock, h_lock = one["lock"], handover["lock"]

    def both(label: str, pick: Any) -> str:
        return f"| {label} | {pick(one)} | {pick(spread)} |"

    ratio = f"{ceiling['ratio']:.2f}x" if ceiling.get("ratio") else "n/a"
    return "\n".join(
        [
            "| Starts as fast as the client can | One key value: one lock (limit 10,000) | "
            "A key value per start: over 64 locks |",
            "|---|---|---|",
            both("Runs started", lambda side: f"{side['starts']:,} in {side['seconds']:.1f} s"),
            both("Starts per second", lambda side: f"**{side['starts_per_second']:,.1f}**"),
            f"| One key value over a key value per start | {ratio} | |",
            both(
                "Start call (submit), p50 / p95 (ms)",
                lambda side: f"{_ms(side['start_call'].get('p50')):,.0f} / {_ms(side['start_call'].get('p95')):,.0f}",
            ),
            both("CPU ms per start", _cpu),
            both("Started as / ended", lambda side: f"{_statuses(side['started_as'])} / {_statuses(side['statuses'])}"),
            both("Starts that failed (the error)", lambda side: _errors(side["errors"])),
            f"| The lock's continue-as-new count / its current history (events, bytes) | "
            f"{lock['continued_as_new']} / {lock['current_history_events']:,}, {lock['current_history_bytes']:,} | |",
            "",
            "| One key value, limit 1 | Handover |",
            "|---|---|",
            f"| Runs served in line | {handover['runs']:,} in {handover['seconds']:.1f} s "
            f"(from the first start until the last ended) |",
            f"| Runs per second one key serves | **{handover['runs_per_second']:,.2f}** |",
            f"| Started as / ended | {_statuses(handover['started_as'])} / {_statuses(handover['statuses'])} |",
            f"| The lock's continue-as-new count / its current history (events, bytes) | "
            f"{h_lock['continued_as_new']} / {h_lock['current_history_events']:,}, "
            f"{h_lock['current_history_bytes']:,} |",
        ]
    )


def _stack(figures: dict[str, Any]) -> str:
    own = figures.get("own_stack")
    if own is None:
        return ""
    if own:
        return "The bench started its own Temporal server and S3 store: their CPU figures are this section's alone.\n"
    return (
        "The bench reused a running Temporal server and S3 store: their CPU figures include the requests of "
        "anything else using them meanwhile.\n"
    )


def _load(figures: dict[str, Any]) -> str:
    load = figures.get("load_average")
    if not load:
        return ""
    return (
        f"The machine's load average (1 min, 2 cores shared with other jobs, which may include another test "
        f"suite or CI run) was {load['before'][0]:.1f} as the section began and {load['after'][0]:.1f} as it ended."
    )


def section(figures: dict[str, Any], command: str, started_at: str, machine: str) -> str:
    """The BENCHMARKS.md section, between its markers."""
    throughput = figures["throughput"]
    return f"""{START}
## Flow control: per-key concurrency

Measured by `{command}` on {started_at} ({figures["seconds"]} s), on {machine}.
{_stack(figures)}**Keyed** is W4's shape (A -> B -> C with the bench agent, {figures["concurrency"]} runs at once,
a new run starting when one ends, as the floor comparison runs it) with
`concurrency: [{{key: "{{{{customer}}}}", limit: 1}}]` and every run its own `customer`: every start
claims the slot of a key value no other run has, in one of the agent's 64 key-lock workflows
(long-lived shards: no workflow is created for a new key value); a run nobody waits for ends
without a word to its lock, which finds it ended when the key is needed again or at its periodic
check. So the difference is the cost of the locks themselves. **Plain** is the same definition without
`concurrency`. Both run on the same stack and workers (in the bench process) in
{throughput["rounds"]} interleaved rounds of {throughput["batch"]:,} runs a side, the side that
goes first alternating; runs per second is a round's runs over its wall time, from the first
start call until the last run's result; CPU is per run by process over the same batches.
**Start to running** is measured per run from the moment the bench calls `DsmoClient.submit`
until the first stage's agent runs (the agent's clock, in the same process); on a sample of each
side, also until the trail's `SLOT_TAKEN` (the keyed run got its slot) and `STAGE_STARTED`.

{throughput_table(figures)}

**One lock.** One-stage runs of the same definition with a limit no start waits for (10,000)
are started {figures["concurrency"]} at a time, as fast as the client can, for
{figures["ceiling"]["one_lock"]["seconds"]:.0f} s a side in two halves (the side that goes
first alternating): all of one key value, so that every start is a claim on the same lock
workflow (one shard of the keys), and, as the reference, each start its own key value (spread
over the 64 shards). The runs they admit run and give their slots back meanwhile, on the same two cores;
the start call is `DsmoClient.submit`, claim and start. The handover starts
{figures["handover"]["runs"]:,} one-stage runs of one key value with limit 1, {figures["concurrency"]}
at a time: the key serves them one after another, each run's end handing the slot to the next in line.

{lock_table(figures)}

Keyed runs ran at {throughput["ratio"]:.2f}x the plain runs' rate (the issue's target: 0.8x or more).
{_load(figures)}
{END}"""
