"""The Table 1 study behind the `Study` protocol: `python -m bench table1` (`make bench TABLE1=1`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.paths import RESULTS
from bench.report import draw, machine
from bench.runner import Bench, BenchConfig
from bench.section_files import publish_section
from bench.stack import Stack
from bench.studies.table1.table1_cli import END, START, table1_text


@dataclass
class Table1:
    """Table 1's experiment alone, every workload and mode with its repetitions (each its own seed).

    Attributes:
        charts_dir: where the section's charts are drawn (with ``--update``: they are the
            section's images); None draws none.
        out_dir: the results folder.
    """

    charts_dir: Path | None = None
    out_dir: Path = field(default=RESULTS)
    name: str = "table1"
    markers: tuple[str, str] | None = (START, END)

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """The experiment on the stack ``stack`` opens; saves ``table1-<stamp>.json``, prints the section."""
        config = BenchConfig() if quick else BenchConfig.full()
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        command = "make bench TABLE1=1" + (" QUICK=1" if quick else "")
        results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": command}
        results["config"] = dict(vars(config))
        started = time.perf_counter()
        async with stack() as (settings, devstack):
            bench = Bench(settings, config, devstack=devstack)
            async with bench.workers():
                results.update(await bench.table1_repeated())
        results["seconds"] = round(time.perf_counter() - started, 1)
        if self.charts_dir is not None:  # the section shows these charts: drawn from the same results
            draw(results, self.charts_dir)
        text = self.section(results)
        publish_section(results, name="table1", text=text, markers=(START, END), out_dir=self.out_dir, page=None)
        return results

    def section(self, results: dict[str, Any]) -> str | None:
        """Table 1's section with its own date (the full run's page writes it without)."""
        return f"{START}\n{table1_text(results, own_run=True)}\n{END}"
