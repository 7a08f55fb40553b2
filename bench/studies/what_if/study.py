"""The what-if study behind the `Study` protocol: `python -m bench what-if` (`make bench WHATIF=1`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.report import machine
from bench.runner import BenchConfig
from bench.stack import Stack
from bench.studies.what_if.what_if_cli import MARKERS, add_what_if, what_if_section


@dataclass
class WhatIf:
    """1,000 ended runs (100 quick) replayed against a candidate version, and its section."""

    name: str = "what-if"
    markers: tuple[str, str] | None = MARKERS

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """The section alone on ``stack()`` (the running stack, else a private one); its results."""
        from dsmo.client.dsmo_client import DsmoClient

        config = BenchConfig() if quick else BenchConfig.full()
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        command = "make bench WHATIF=1" + (" QUICK=1" if quick else "")
        results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": command}
        async with stack() as (settings, started):
            dsmo = await DsmoClient.connect(settings)
            await add_what_if(results, settings, dsmo, config.what_if_runs, own_stack=started is not None)
        print(what_if_section(results) or "the what-if section did not run")
        return results

    def section(self, results: dict[str, Any]) -> str | None:
        """The what-if section; None when it did not run."""
        return what_if_section(results)
