"""The flow-control section within the full bench (`make bench`); `study.Flow` runs it alone (`FLOW=1`)."""

from __future__ import annotations

import os
from typing import Any

from bench.paths import RESULTS as OUT_DIR
from bench.runner import BenchConfig
from bench.sections import splice
from bench.studies.flow.flow_report import END, START
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
    from bench.studies.flow.flow_bench import flow_bench
    from bench.studies.flow.flow_report import save

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


def with_section(page: str, results: dict[str, Any]) -> str:
    """BENCHMARKS.md's text with the flow-control section of ``results`` in place (as it was if
    none; at the end if the page has none yet)."""
    text = flow_section(results)
    return splice(page, text, START, END) if text else page


def flow_section(results: dict[str, Any]) -> str | None:
    """The section's text from a bench's ``results``; None when the section did not run."""
    from bench.studies.flow.flow_report import section

    if not results.get("flow_control"):
        return None
    return section(results["flow_control"], results["command"], results["started_at"], results["machine"])
