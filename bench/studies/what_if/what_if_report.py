"""The what-if section of BENCHMARKS.md and its JSON file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.report import file_stamp

START, END = "<!-- what-if:start -->", "<!-- what-if:end -->"
ROLES = {"worker": "worker", "temporal": "Temporal server", "s3": "S3 store", "python": "bench process (client)"}


def save(figures: dict[str, Any], out_dir: Path, started_at: str) -> Path:
    """Write the section's figures beside the other results; the file's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"what-if-{file_stamp(started_at)}.json"
    path.write_text(json.dumps(figures, indent=2, default=str))
    return path


def _row(label: str, ours: float, base: float, *, digits: int = 1) -> str:
    ratio = f"{ours / base:.2f}x" if base else ""
    return f"| {label} | {ours:,.{digits}f} | {base:,.{digits}f} | {ratio} |"


def table(figures: dict[str, Any]) -> str:
    """The replay beside the corpus's own first run: rate and CPU per run; then what the replay did."""
    replay, original, summary = figures["replay"], figures["original"], figures["report_summary"]
    lines = [
        "| Measure | What-if replay | Original runs | Ratio |",
        "|---|---|---|---|",
        _row("Runs per second", replay["runs_per_second"], original["runs_per_second"]),
    ]
    batches = original.get("batches")
    if batches:
        rates = [batch["runs"] / batch["seconds"] for batch in batches.values() if batch["seconds"]]
        lines.append(
            f"| Original runs per second: the corpus / the runs after the replay | | "
            f"{' / '.join(f'{rate:.1f}' for rate in rates)} | |"
        )
    for role, name in ROLES.items():
        if role in replay["cpu_ms_per_run"] and role in original["cpu_ms_per_run"]:
            label = f"CPU ms per run, {name}"
            lines.append(_row(label, replay["cpu_ms_per_run"][role], original["cpu_ms_per_run"][role]))
    history = figures.get("history")
    if history:
        original_history, replay_history = history["original"], history["replay"]
        lines.append(_row("History events per run", replay_history["events"], original_history["events"]))
        lines.append(_row("History bytes per run", replay_history["bytes"], original_history["bytes"], digits=0))
    lines += _planning(figures.get("planning"), replay)
    calls, messages = figures["agent_calls"], figures["messages"]
    lines += [
        "",
        "| Replay | Measured | Expected |",
        "|---|---|---|",
        f"| Runs replayed | {summary['runs']:,} | {figures['runs']:,} |",
        f"| Same path / diverged | {summary['samePath']:,} / {summary['diverged']:,} | "
        f'{figures["runs"] - figures["diverged_expected"]:,} / {figures["diverged_expected"]:,} (the "no" runs) |',
        f"| Where they diverged | {_points(summary['byDivergence'])} | after reply: reject -> follow_up |",
        f"| Errors | {summary['errors']} | 0 |",
        f"| Agent calls during the replay (the corpus made {calls['corpus']:,}) | {calls['during_replay']} | 0 |",
        f"| Messages sent during the replay (the corpus sent {messages['corpus']:,}) | "
        f"{messages['during_replay']} | 0 |",
    ]
    lines.append("")
    lines.append(f"The replay ran at {figures['ratio']:.2f}x the original runs' rate.{_load(figures)}")
    return "\n".join(lines)


def _planning(planning: dict[str, Any] | None, replay: dict[str, Any]) -> list[str]:
    """Planning a replay (reading the record) measured apart, beside the whole replay's CPU."""
    if not planning:
        return []
    lines = [
        "",
        f"| Planning a replay, measured apart on {planning['runs']:,} runs | Planning | Whole replay | Share |",
        "|---|---|---|---|",
        f"| Runs per second | {planning['runs_per_second']:,.1f} | {replay['runs_per_second']:,.1f} | |",
    ]
    for role, name in ROLES.items():
        if role in planning["cpu_ms_per_run"] and role in replay["cpu_ms_per_run"]:
            ours, whole = planning["cpu_ms_per_run"][role], replay["cpu_ms_per_run"][role]
            share = f"{ours / whole:.0%}" if whole else ""
            lines.append(f"| CPU ms per run, {name} | {ours:,.1f} | {whole:,.1f} | {share} |")
    return lines


def _points(points: dict[str, int]) -> str:
    return "; ".join(f"{point} ({count:,})" for point, count in points.items()) or "none"


def _load(figures: dict[str, Any]) -> str:
    load = figures.get("load_average")
    if not load:
        return ""
    return (
        f" The machine's load average (1 min, 2 cores shared with other jobs) was {load['before'][0]:.1f} "
        f"as the replay began and {load['after'][0]:.1f} as it ended."
    )


def _again(figures: dict[str, Any]) -> str:
    batches = figures["original"].get("batches", {})
    return f"{batches['after_the_replay']['runs']:,}" if "after_the_replay" in batches else "no"


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


def section(figures: dict[str, Any], command: str, started_at: str, machine: str, note: str = "") -> str:
    """The BENCHMARKS.md section, between its markers."""
    runs = figures["runs"]
    return f"""{START}
## What-if replay of recorded runs

Measured by `{command}` on {started_at} ({figures["seconds"]} s), on {machine}{note}.
{_stack(figures)}{runs:,} runs of a version-1 definition shaped like a real agent (a `run_agent` stage, a message,
a wait for the reply, a transition on it, a closing message) run on one worker process and end,
{figures["answers"]["yes"]:,} answered "yes" and {figures["answers"]["no"]:,} "no". Version 2
follows a "no" up instead of saying goodbye, and `DsmoClient.what_if` (what `dsmo replay --query`
runs) replays all {runs:,} ended runs against it in one call, each as a new linked run on the same
worker: the recorded reply answers the wait, the unchanged agent's recorded output is reused,
nothing is sent. **What-if replay** is that call, from the visibility query until the report is
back: for each run, reading its record, the replay run from start to end, and comparing the paths.
**Original runs** is the same runs' own first run, measured in the same bench run on the same
stack: the corpus before the replay, and {_again(figures)} more of the same runs after it so that
a change in the machine's load meets both sides; each batch from its first start until visibility
shows every run waiting for its reply, plus from its first reply sent until visibility shows every
run ended. The time the runs sat waiting between the two is not counted; the replies themselves
are (they are the events the replay reads from the record). Starts and replies are sent
{figures["starts_and_replies_at_once"]} at a time; the replay runs {figures["replay_concurrency"]}
runs at a time (the batch's default). CPU is per run by process over those same periods; the
bench process's CPU is the client's (starts, replies and polls for the original runs; the what-if
call for the replay). The worker counts its agent's calls and the file channel's outbox counts
the messages. Planning a replay (what `what_if` does before it starts one: reading the run's
status, trail and definition) is measured again, alone, on the first runs of the corpus, at the
replay's concurrency. History sizes are read from Temporal for
{figures.get("history", {}).get("sampled", 0)} runs spread over the corpus and their replays.

{table(figures)}
{END}"""
