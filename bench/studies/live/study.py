"""The live-stream study behind the `Study` protocol: `python -m bench live` (`make bench LIVE=1`).

Issue 56: 1,000 runs followed by 100 SSE readers, against the same runs with no reader: the
worker's and the ingress's CPU and memory per stream and the cost a reader adds to a run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.paths import RESULTS
from bench.report import machine
from bench.section_files import publish_section
from bench.stack import Stack
from bench.studies.live.live_report import END, START, costs, section, streams_summary

MARKERS = START, END
RUNS, QUICK_RUNS, READERS = 1000, 100, 100


@dataclass
class Live:
    """Runs with no reader and the same runs followed live; writes ``live-<stamp>.json`` under ``out_dir``.

    Attributes:
        runs: runs a side (None: `RUNS`, or `QUICK_RUNS` when quick).
        readers: readers, and runs live at once (`READERS`).
        delay: the agent's `delay` between its stages (`live_bench.DELAY`: a run lives ~10 s).
    """

    out_dir: Path = field(default=RESULTS)
    runs: int | None = None
    readers: int = READERS
    delay: str = "8s"
    name: str = "live"
    markers: tuple[str, str] | None = MARKERS

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """Both sides on ``stack()``; prints the section and saves the results.

        Raises:
            RuntimeError: A run did not complete, or a process did not start.
        """
        from bench.studies.live.live_bench import live_bench
        from dsmo.client.dsmo_client import DsmoClient

        runs = self.runs or (QUICK_RUNS if quick else RUNS)
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        command = "make bench LIVE=1" + (" QUICK=1" if quick else "")
        results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": command}
        began = time.perf_counter()
        async with stack() as (settings, _):
            measured = await live_bench(settings, await DsmoClient.connect(settings), runs, self.readers, self.delay)
        streams = measured["streams"]
        measured["streams"] = streams_summary(streams["records"], streams["peak_open"])
        measured["costs"] = costs(measured)
        results["live"] = measured
        results["seconds"] = round(time.perf_counter() - began, 1)
        # A stream that missed its end or carried an item twice or out of order fails the command.
        results["failed"] = bool(measured["streams"]["with_problems"]) or measured["streams"]["reached_end"] != runs
        publish_section(results, name="live", text=section(results), markers=MARKERS, out_dir=self.out_dir, page=None)
        return results

    def section(self, results: dict[str, Any]) -> str | None:
        """The live section; None when it did not run."""
        return section(results)
