"""The flow-control study behind the `Study` protocol: `python -m bench flow` (`make bench FLOW=1`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.report import machine
from bench.runner import BenchConfig
from bench.stack import Stack
from bench.studies.flow.flow_cli import MARKERS, add_flow, flow_section


@dataclass
class Flow:
    """W4 runs with a per-key limit against the same without, one lock's ceiling, and its section."""

    name: str = "flow"
    markers: tuple[str, str] | None = MARKERS

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """The section alone on ``stack()`` (the running stack, else a private one); its results."""
        config = BenchConfig() if quick else BenchConfig.full()
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        command = "make bench FLOW=1" + (" QUICK=1" if quick else "")
        results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": command}
        async with stack() as (settings, started):
            await add_flow(results, settings, config, own_stack=started is not None)
        print(flow_section(results) or "the flow-control section did not run")
        return results

    def section(self, results: dict[str, Any]) -> str | None:
        """The flow-control section; None when it did not run."""
        return flow_section(results)
