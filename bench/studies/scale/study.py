"""The scale study behind the `Study` protocol: `python -m bench scale` (`make bench SCALE=1` or `SCALE=N`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.paths import RESULTS
from bench.report import machine
from bench.runner import BenchConfig
from bench.section_files import publish_section
from bench.stack import Stack
from bench.studies.scale.scale_report import END, START, scale_section


@dataclass
class Scale:
    """Many runs waiting on one worker process, beside as many bare Temporal workflows.

    Attributes:
        runs: runs waiting (None: the configuration's).
        out_dir: the results folder.
    """

    runs: int | None = None
    out_dir: Path = field(default=RESULTS)
    name: str = "scale"
    markers: tuple[str, str] | None = (START, END)

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """The scale test alone on ``stack()``; saves ``scale-<stamp>.json``, prints the section."""
        from bench.studies.scale.scale import scale_test
        from dsmo.client.dsmo_client import DsmoClient

        config = BenchConfig() if quick else BenchConfig.full()
        count = self.runs or config.scale_runs
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        command = "make bench SCALE=" + (str(self.runs) if self.runs else "1") + (" QUICK=1" if quick else "")
        results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": command}
        async with stack() as (settings, started):
            results["scale"] = await scale_test(settings, await DsmoClient.connect(settings), count, started)
        text = scale_section(results)
        publish_section(results, name="scale", text=text, markers=(START, END), out_dir=self.out_dir, page=None)
        return results

    def section(self, results: dict[str, Any]) -> str | None:
        """The scale section; None when the test did not run."""
        return scale_section(results)
