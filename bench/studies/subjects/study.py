"""The data-subjects study behind the `Study` protocol: `python -m bench subjects` (`make bench SUBJECTS=1`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.paths import RESULTS
from bench.report import file_stamp, machine
from bench.runner import BenchConfig
from bench.stack import Stack
from bench.studies.subjects.subject_bench import END, START, section, subject_bench


@dataclass
class Subjects:
    """W1 and W4 with and without a subject, erasing a subject's runs, and its section."""

    name: str = "subjects"
    markers: tuple[str, str] | None = (START, END)

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """The section alone on ``stack()``; saves ``subjects-<stamp>.json``, prints the section."""
        config = BenchConfig() if quick else BenchConfig.full()
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        command = "make bench SUBJECTS=1" + (" QUICK=1" if quick else "")
        results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": command}
        load = os.getloadavg()
        async with stack() as (settings, _started):
            results["subjects"] = await subject_bench(settings, config)
        # The machine is shared: its 1/5/15-minute load as the study began, and as it ended.
        results["subjects"]["load_average"] = {
            "before": [round(x, 2) for x in load],
            "after": [round(x, 2) for x in os.getloadavg()],
        }
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"subjects-{file_stamp(stamp)}.json").write_text(json.dumps(results, indent=2, default=str))
        print(section(results))
        return results

    def section(self, results: dict[str, Any]) -> str | None:
        """The data-subjects section."""
        return section(results)
