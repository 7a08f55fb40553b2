"""`make reliability`: the crash, restart and storage-fault scenarios with larger counts than CI.

python -m bench.reliability [--runs 300] [--outage-runs 100] [--outage 30] [--update]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.reliability import report, scenarios
from bench.reliability.stack import FaultStack
from bench.report import machine
from dsmo.runtime.exits import hard_exit

REPO = Path(__file__).resolve().parents[2]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    began = time.perf_counter()
    stack = FaultStack(Path(tempfile.mkdtemp(prefix="dsmo-reliability-")))
    rows = []
    try:
        client = await stack.start()
        plan: list[tuple[str, Callable[[], Awaitable[scenarios.ScenarioResult]]]] = [
            ("worker killed", lambda: scenarios.worker_crash(stack, client, runs=args.runs)),
            ("Temporal killed", lambda: scenarios.temporal_restart(stack, client, runs=args.runs)),
            ("S3 stopped", lambda: scenarios.s3_outage(stack, client, runs=args.outage_runs, outage_s=args.outage)),
        ]
        for name, scenario in plan:
            print(f"{name} ...", flush=True)
            result = await scenario()
            rows.append(result.row())
            print(report.table([rows[-1]]), flush=True)
    finally:
        stack.down()
    command = "make reliability" + (f" RUNS={args.runs}" if args.runs != 300 else "")
    return {
        "command": command,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(time.perf_counter() - began, 1),
        "machine": machine(),
        "scenarios": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="runs in the worker and Temporal scenarios")
    parser.add_argument("--outage-runs", type=int, default=100, help="runs in the S3 scenario")
    parser.add_argument("--outage", type=float, default=30.0, help="seconds the S3 store stays down")
    parser.add_argument("--update", action="store_true", help="write the table into BENCHMARKS.md")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    out = REPO / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "reliability.json").write_text(json.dumps(results, indent=2))
    print("\n" + report.table(results["scenarios"]))
    bad = [row["scenario"] for row in results["scenarios"] if row["lost"] or row["duplicates"] or row["orphans"]]
    if args.update:
        page = REPO / "BENCHMARKS.md"
        page.write_text(report.splice(page.read_text() if page.exists() else "# Benchmarks\n", report.section(results)))
        print(f"BENCHMARKS.md updated; results in {out / 'reliability.json'}")
    if bad:
        print(f"reliability: runs lost, effects duplicated or orphaned in: {', '.join(bad)}")
    # The Temporal client's threads can abort a normal interpreter exit (see dsmo.runtime.exits.hard_exit).
    hard_exit(1 if bad else 0)


if __name__ == "__main__":
    main()
