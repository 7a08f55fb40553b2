"""The scale test's section of BENCHMARKS.md: many runs waiting on one worker, beside bare Temporal."""

from __future__ import annotations

from typing import Any

START, END = "<!-- scale:start -->", "<!-- scale:end -->"


def _ratio(ours: float, reference: float) -> str:
    return f"{ours / reference:.2f}x" if reference else "-"


def scale_table(scale: dict[str, Any]) -> list[str]:
    runs, first = scale["runs"], scale.get("first", 10)
    lines = ["| Scale | DSMO | bare Temporal | ratio |", "|---|---|---|---|"]
    lines.append(f"| Runs waiting at once | {runs:,} | {runs:,} | |")
    if "start_per_s" in scale:
        resume, floor = scale["resume"], scale["floor_resume"]
        lines += [
            f"| Start rate (start calls/s; DSMO's all waiting after {scale['start_seconds']:.0f} s) "
            f"| {scale['start_per_s']:.0f} "
            f"| {scale['floor_start_per_s']:.0f} | {_ratio(scale['start_per_s'], scale['floor_start_per_s'])} |",
            f"| Resume rate, {resume['offered_per_s']:.0f}/s offered (replies/s) | {resume['achieved_per_s']:.0f} "
            f"| {floor['achieved_per_s']:.0f} | {_ratio(resume['achieved_per_s'], floor['achieved_per_s'])} |",
            f"| Reply accepted while all are resumed, p50 / p95 (ms) | {resume['p50'] * 1000:.0f} / "
            f"{resume['p95'] * 1000:.0f} | {floor['p50'] * 1000:.0f} / {floor['p95'] * 1000:.0f} | |",
            f"| Reply accepted with {first} waiting, p50 / p95 (ms) | {scale['resume_p50_at_10'] * 1000:.0f} / "
            f"{scale['resume_p95_at_first'] * 1000:.0f} | | |",
            f"| Reply accepted with {runs:,} waiting, p50 / p95 (ms) | {scale['resume_p50_at_scale'] * 1000:.0f} / "
            f"{scale['resume_p95_at_scale'] * 1000:.0f} | | |",
            f"| History bytes of a waiting run, started first / last | {scale['history_bytes_first']:,} / "
            f"{scale['history_bytes_last']:,} | | |",
            f"| Worker RSS with all waiting / after all resumed (MB; target < 1,500) | {scale['worker_rss_mb']:.0f} / "
            f"{scale['worker_rss_after_mb']:.0f} | | |",
        ]
    else:  # results from before the reference was measured
        lines += [
            f"| Time to start them all (s) | {scale['start_seconds']:.1f} | | |",
            f"| Worker RSS (MB) | {scale['worker_rss_mb']:.0f} | | |",
        ]
    lines.append(f"| Temporal server RSS (MB, both sides' runs) | {scale['server_rss_mb']:.0f} | | |")
    return lines + console_table(scale)


def console_table(scale: dict[str, Any]) -> list[str]:
    """The console's latency with the scale test's runs waiting (target: p95 under 300 ms)."""
    console = scale.get("console")
    if not console:
        return []
    rows = [
        ("Task list, first page", "tasks", "p95 < 300"),
        ("Task list, filtered", "tasks_filtered", "p95 < 300"),
        ("Task list, first page, its total counted afresh", "tasks_fresh_total", "p95 < 300"),
        ("Run page", "run_page", "p95 < 300"),
        ("Visibility alone: the list's 25 rows", "visibility_list", ""),
        ("Visibility alone: the list's total (a fresh count)", "visibility_count", ""),
    ]
    lines = [
        "",
        f"The console (`dsmo serve` in its own process) with the {scale['runs']:,} runs waiting, one request "
        "at a time over HTTP with a signed-in session: the task list's first page (25 rows and the total "
        "from visibility, asked for at once; the console reuses a total for 5 s, so most of these loads "
        "reuse one), the list filtered by kind and agent, run pages of runs spread over the set, and the "
        "first page loaded once every 5.2 s, so that each load counts afresh. Then the list's two "
        "visibility calls alone, straight against Temporal.",
        "",
        f"| Console with {scale['runs']:,} waiting | p50 (ms) | p95 (ms) | requests | Target |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {label} | {console[key]['p50_ms']:.0f} | {console[key]['p95_ms']:.0f} | {console[key]['n']} | {target} |"
        for label, key, target in rows
        if key in console  # results from before the visibility rows were measured lack them
    ]
    return lines


def scale_section(results: dict[str, Any]) -> str | None:
    scale = results.get("scale")
    if not scale:
        return None
    return f"""{START}
## Many runs waiting

Measured by `{results["command"]}` on {results["started_at"]}, on {results["machine"]}. DSMO runs that
wait for a reply (a one-node definition) are started on one worker process (`dsmo worker`),
{scale.get("first", 10)} first and resumed one by one, then the rest, {40} starts at a time, in turns
of 2,000 with as many bare Temporal workflows that wait for one update on their own worker
(`bench/studies/scale/scale_floor.py`), on the same server. With all waiting, replies are timed one by one
and the console is loaded; then every run of both sides is resumed at the same offered rate
(DSMO's reply is `DsmoClient.respond`, an update the run accepts; the reference's is an update too).
Histories: a waiting run started first and one started last.

{chr(10).join(scale_table(scale))}
{END}"""
