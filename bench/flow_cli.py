"""The flow-control section as `make bench` runs it: within the full bench, or alone (`FLOW=1`)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from bench.flow_report import END, START
from bench.migration_cli import OUT_DIR
from bench.report import machine
from bench.runner import BenchConfig
from bench.sections import splice, write_section
from bench.stack import Stack
from dsmo.config.settings import Settings

MARKERS = START, END  # the section's markers in BENCHMARKS.md


async def add_flow(
    results: dict[str, Any], settings: Settings, config: BenchConfig, *, own_stack: bool | None = None
) -> None:
    """Run the section at ``config``'s sizes and add its figures to ``results["flow_control"]``.

    ``own_stack`` says whether the bench started the Temporal server and S3 store itself (True)
    or reused a running one that other jobs may use too (False); the section says which.

    The figures are also written to their own file (see `flow_report.save`). A failure is
    printed and leaves the rest of the benchmark's results as they are.
    """
    from bench.flow_bench import flow_bench
    from bench.flow_report import save

    print(f"flow control: {config.flow_runs} W4 runs keyed and plain, one lock's ceiling and handover", flush=True)
    load = os.getloadavg()
    try:
        figures = await flow_bench(settings, config)
    except Exception as err:  # noqa: BLE001 - report the rest of the benchmark anyway
        print(f"flow-control section failed: {type(err).__name__}: {err}", flush=True)
        return
    figures["own_stack"] = own_stack
    # The machine is shared: its 1/5/15-minute load as the section began, and as it ended.
    figures["load_average"] = {
        "before": [round(x, 2) for x in load],
        "after": [round(x, 2) for x in os.getloadavg()],
    }
    save(figures, OUT_DIR, results["started_at"])
    results["flow_control"] = figures


async def flow_only(quick: bool, stack: Stack, *, update_benchmarks: bool) -> dict[str, Any]:
    """Run just the flow-control section on ``stack()`` (the bench's: the running stack, else a private one).

    With ``update_benchmarks``, only its section of BENCHMARKS.md is rewritten.
    """
    config = BenchConfig() if quick else BenchConfig.full()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    command = "make bench FLOW=1" + (" QUICK=1" if quick else "")
    results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": command}
    async with stack() as (settings, started):
        await add_flow(results, settings, config, own_stack=started is not None)
    text = flow_section(results)
    print(text or "the flow-control section did not run")
    if update_benchmarks and text:
        write_section(text, MARKERS)
    return results


def with_section(page: str, results: dict[str, Any]) -> str:
    """BENCHMARKS.md's text with the flow-control section of ``results`` in place (as it was if
    none; at the end if the page has none yet)."""
    text = flow_section(results)
    return splice(page, text, START, END) if text else page


def flow_section(results: dict[str, Any]) -> str | None:
    """The section's text from a bench's ``results``; None when the section did not run."""
    from bench.flow_report import section

    if not results.get("flow_control"):
        return None
    return section(results["flow_control"], results["command"], results["started_at"], results["machine"])
