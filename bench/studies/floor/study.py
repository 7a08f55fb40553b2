"""The floor study behind the `Study` protocol: `python -m bench floor` (`make bench FLOOR=N`); it prints only."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.paths import RESULTS
from bench.report import file_stamp, floor_spread, machine
from bench.runner import Bench, BenchConfig
from bench.stack import Stack


@dataclass
class Floor:
    """The floor comparison and resume latency only, ``repeats`` times: the targets' spread.

    Attributes:
        repeats: how many times the comparison runs.
        out_dir: the results folder (``floor-<stamp>.json``).
    """

    repeats: int = 1
    out_dir: Path = field(default=RESULTS)
    name: str = "floor"
    markers: tuple[str, str] | None = None  # no section: BENCHMARKS.md's floor table comes from `all`

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """Measure ``repeats`` times on ``stack()``; print the spread and save the results file."""
        config = BenchConfig() if quick else BenchConfig.full()
        started, stamp = time.perf_counter(), datetime.now(UTC).isoformat(timespec="seconds")
        async with stack() as (settings, _):
            measured = await Bench(settings, config).run_against_floor(self.repeats)
        results: dict[str, Any] = {
            "config": {k: v for k, v in vars(config).items()},
            "repeats": measured,
            "started_at": stamp,
            "machine": machine(),
            "command": f"make bench FLOOR={self.repeats}" + (" QUICK=1" if quick else ""),
            "seconds": round(time.perf_counter() - started, 1),
        }
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / f"floor-{file_stamp(stamp)}.json"
        path.write_text(json.dumps(results, indent=2, default=str))
        spent = f"{results['seconds']} s, {results['machine']}"
        print(f"### Against the raw-Temporal floor, {self.repeats} repeats ({spent})\n")
        print(floor_spread(measured))
        print(f"\nresults: {path}")
        return results

    def section(self, results: dict[str, Any]) -> str | None:
        """None: the floor study has no section of its own."""
        return None
