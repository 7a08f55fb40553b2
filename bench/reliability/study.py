"""`make reliability` (`python -m bench reliability`): the crash, restart and storage-fault
scenarios with larger counts than CI, behind the `Study` protocol.

    python -m bench reliability [--runs 300] [--outage-runs 100] [--outage 30] [--update]
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.paths import RESULTS
from bench.reliability import report, scenarios
from bench.reliability.stack import FaultStack
from bench.report import machine
from bench.stack import Stack


async def run(runs: int, outage_runs: int, outage: float) -> dict[str, Any]:
    """The three scenarios on a private `FaultStack`: ``runs`` runs when the worker and Temporal
    are killed, ``outage_runs`` while S3 is stopped for ``outage`` seconds."""
    began = time.perf_counter()
    stack = FaultStack(Path(tempfile.mkdtemp(prefix="dsmo-reliability-")))
    rows = []
    try:
        client = await stack.start()
        plan: list[tuple[str, Callable[[], Awaitable[scenarios.ScenarioResult]]]] = [
            ("worker killed", lambda: scenarios.worker_crash(stack, client, runs=runs)),
            ("Temporal killed", lambda: scenarios.temporal_restart(stack, client, runs=runs)),
            ("S3 stopped", lambda: scenarios.s3_outage(stack, client, runs=outage_runs, outage_s=outage)),
        ]
        for name, scenario in plan:
            print(f"{name} ...", flush=True)
            result = await scenario()
            rows.append(result.row())
            print(report.table([rows[-1]]), flush=True)
    finally:
        stack.down()
    command = "make reliability" + (f" RUNS={runs}" if runs != 300 else "")
    return {
        "command": command,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(time.perf_counter() - began, 1),
        "machine": machine(),
        "scenarios": rows,
    }


@dataclass
class Reliability:
    """The reliability study: its own fault stack (not the bench's), its table in BENCHMARKS.md."""

    runs: int = 300
    outage_runs: int = 100
    outage: float = 30.0
    name: str = "reliability"
    markers: tuple[str, str] | None = (report.START, report.END)

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """Run the scenarios, save `bench/results/reliability.json`, print the table.

        ``quick`` and ``stack`` are not used: the counts are the options, and the scenarios crash
        parts of a stack of their own.
        """
        results = await run(self.runs, self.outage_runs, self.outage)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "reliability.json").write_text(json.dumps(results, indent=2))
        print("\n" + report.table(results["scenarios"]))
        bad = [row["scenario"] for row in results["scenarios"] if row["lost"] or row["duplicates"] or row["orphans"]]
        if bad:
            print(f"reliability: runs lost, effects duplicated or orphaned in: {', '.join(bad)}")
        return results | {"failed": bool(bad)}

    def section(self, results: dict[str, Any]) -> str | None:
        """The reliability table between its markers."""
        return report.section(results)
