"""The live-stream study's arithmetic and its section of BENCHMARKS.md: what a stream costs."""

from __future__ import annotations

from typing import Any

from bench.metrics import percentile
from bench.studies.live.live_readers import StreamRecord

START, END = "<!-- live:start -->", "<!-- live:end -->"
ROLES = {"worker": "worker", "temporal": "Temporal server", "s3": "S3 store", "python": "bench (starts, readers)"}


def _ms(values: list[float], q: float) -> float | None:
    return round(percentile(values, q) * 1000, 1) if values else None


def streams_summary(records: list[StreamRecord], peak_open: int) -> dict[str, Any]:
    """What the readers got, over every stream: items, lags, refusals, and what the checks found."""
    count = max(len(records), 1)
    kinds: dict[str, int] = {}
    for record in records:
        for kind, seen in record.kinds.items():
            kinds[kind] = kinds.get(kind, 0) + seen
    events = [lag for record in records for lag in record.event_lag_s]
    progress = [lag for record in records for lag in record.progress_lag_s]
    refused: dict[str, int] = {}
    for record in records:
        for code, times in record.refused.items():
            refused[code] = refused.get(code, 0) + times
    wrong = [f"{record.run_id}: {'; '.join(record.problems)}" for record in records if record.problems]
    return {
        "streams": len(records),
        "peak_open": peak_open,
        "reached_end": sum(record.kinds.get("end", 0) == 1 for record in records),
        "items_per_stream": round(sum(record.items for record in records) / count, 2),
        "per_stream_by_kind": {kind: round(seen / count, 2) for kind, seen in sorted(kinds.items())},
        "event_lag_ms": {"p50": _ms(events, 50), "p95": _ms(events, 95)},
        "progress_lag_ms": {"p50": _ms(progress, 50), "p95": _ms(progress, 95)},
        "refused": refused,
        "reconnects": sum(record.reconnects for record in records),
        "items_sharing_the_previous_id": sum(record.shared_ids for record in records),
        "with_problems": len(wrong),
        "problems": wrong[:10],
    }


def costs(measured: dict[str, Any]) -> dict[str, Any]:
    """Per run and per stream: CPU ms by role on each side, what the readers added, the ratios,
    the ingress's CPU and memory per stream, and each side's peak memory.

    Args:
        measured: `live_bench`'s results with ``streams`` already summarised.
    """
    runs, quiet, followed = measured["runs"], measured["quiet"], measured["followed"]
    per_run: dict[str, Any] = {}
    for role in ROLES:
        if role in quiet["cpu_s"] and role in followed["cpu_s"]:
            alone, read = quiet["cpu_s"][role] * 1000 / runs, followed["cpu_s"][role] * 1000 / runs
            per_run[role] = {
                "quiet_ms": round(alone, 2),
                "followed_ms": round(read, 2),
                "added_ms": round(read - alone, 2),
                "ratio": round(read / alone, 2) if alone else None,
            }
    everything = {side: sum(measured[side]["cpu_s"].values()) * 1000 / runs for side in ("quiet", "followed")}
    per_run["total"] = {
        "quiet_ms": round(everything["quiet"], 2),
        "followed_ms": round(everything["followed"], 2),
        "added_ms": round(everything["followed"] - everything["quiet"], 2),
        "ratio": round(everything["followed"] / everything["quiet"], 2) if everything["quiet"] else None,
    }
    open_at_once = max(measured["streams"]["peak_open"], 1)
    ingress_rss = followed["rss_peak_kib"].get("ingress", 0) - followed["rss_start_kib"].get("ingress", 0)
    worker_rss = {side: measured[side]["rss_peak_kib"].get("worker") for side in ("quiet", "followed")}
    return {
        "cpu_ms_per_run": per_run,
        "ingress": {
            "cpu_ms_per_stream": round(followed["cpu_s"].get("ingress", 0.0) * 1000 / runs, 2),
            "rss_peak_kib": followed["rss_peak_kib"].get("ingress"),
            "rss_added_kib_per_open_stream": round(ingress_rss / open_at_once, 1),
        },
        "worker_rss_peak_kib": worker_rss,
        "worker_rss_added_kib_per_open_stream": round(
            ((worker_rss["followed"] or 0) - (worker_rss["quiet"] or 0)) / open_at_once, 1
        ),
        "seconds": {"quiet": quiet["seconds"], "followed": followed["seconds"]},
    }


def _cell(value: float | None, unit: str = "") -> str:
    return "—" if value is None else f"{value:,.2f}{unit}"


def table(live: dict[str, Any]) -> str:
    """The section's table: CPU per run by process with no reader and followed, and the ratio."""
    lines = [
        "| process | CPU ms per run, no reader | CPU ms per run, followed | added per run | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for role, label in ROLES.items():
        figures = live["costs"]["cpu_ms_per_run"].get(role)
        if figures:
            lines.append(
                f"| {label} | {_cell(figures['quiet_ms'])} | {_cell(figures['followed_ms'])} "
                f"| {_cell(figures['added_ms'])} | {_cell(figures['ratio'], ' x')} |"
            )
    ingress = live["costs"]["ingress"]
    lines.append(f"| ingress (`dsmo serve`) | — | {_cell(ingress['cpu_ms_per_stream'])} | — | — |")
    total = live["costs"]["cpu_ms_per_run"].get("total")
    if total:
        lines.append(
            f"| **all of them** | {_cell(total['quiet_ms'])} | {_cell(total['followed_ms'])} "
            f"| {_cell(total['added_ms'])} | {_cell(total['ratio'], ' x')} |"
        )
    return "\n".join(lines)


def section(results: dict[str, Any]) -> str | None:
    """The study's section, markers included; None when it did not run."""
    live = results.get("live")
    if not live:
        return None
    cost, streams = live["costs"], live["streams"]
    ingress, worker_rss = cost["ingress"], cost["worker_rss_peak_kib"]
    kinds = ", ".join(f"{seen} {kind}" for kind, seen in streams["per_stream_by_kind"].items())
    return f"""{START}
## Live streams: what following runs costs (`make bench LIVE=1`)

Measured by `{results["command"]}` on {results["started_at"]} ({results.get("seconds", "?")} s), on
{results["machine"]}. {live["runs"]} runs of one agent (a stage reporting `dsmo.progress` four
times, a `delay` of {live["delay"]}, a stage reporting twice) on a `dsmo worker` process, in
{live["readers"]} lanes (a lane starts a run, sees it end, starts the next): first with no reader,
then the same {live["runs"]} runs each followed from its start to its `end` by an SSE reader
(`GET /executions/{{id}}/stream` on a `dsmo serve` process; {streams["peak_open"]} streams open at
once at most). Each side has a fresh worker and one unmeasured run first.

{table(live)}

Per stream: the ingress spent {_cell(ingress["cpu_ms_per_stream"])} ms of CPU and grew by
{_cell(ingress["rss_added_kib_per_open_stream"])} KiB per open stream (peak
{ingress["rss_peak_kib"]:,} KiB); the worker's peak memory was {worker_rss["quiet"]:,} KiB with no
reader and {worker_rss["followed"]:,} KiB followed. Each stream carried
{streams["items_per_stream"]} items ({kinds}); {streams["reached_end"]} of {streams["streams"]}
reached `end`, {streams["with_problems"]} had an item out of order, missing or twice. A trail
event reached its reader {_cell(streams["event_lag_ms"]["p50"])} ms after its `at` at the median
(p95 {_cell(streams["event_lag_ms"]["p95"])} ms), a progress report
{_cell(streams["progress_lag_ms"]["p50"])} ms after the agent made it (p95
{_cell(streams["progress_lag_ms"]["p95"])} ms). Wall time: {cost["seconds"]["quiet"]} s with no
reader, {cost["seconds"]["followed"]} s followed. CPU is user + system time per process over each
side; one run on this machine, so take the ratios, not the absolute figures.
{END}"""
