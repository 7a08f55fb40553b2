"""The W5 study behind the `Study` protocol: `python -m bench w5` (`make bench W5=1`), and its part of `all`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.paths import RESULTS
from bench.report import machine
from bench.stack import Stack
from bench.studies.w5.w5_report import W5_END, W5_START, w5_section
from dsmo.config.settings import Settings

MARKERS = W5_START, W5_END  # the section's markers in BENCHMARKS.md


async def add_w5(results: dict[str, Any], settings: Settings, dsmo: Any, *, batches: int = 3) -> None:
    """Run W5's ``batches`` and add its figures to ``results["w5"]``; a failure is printed, not raised."""
    from bench.studies.w5.llm_bound import w5

    try:
        results["w5"] = await w5(settings, dsmo, batches=batches)
    except Exception as err:  # noqa: BLE001 - report the rest of the benchmark anyway
        print(f"W5 failed: {type(err).__name__}: {err}", flush=True)


def w5_text(results: dict[str, Any]) -> str | None:
    """W5's section from a bench's ``results``; None when W5 did not run."""
    if not results.get("w5"):
        return None
    return w5_section(results["w5"], results["command"], results["started_at"], results["machine"])


@dataclass
class W5:
    """W5 alone; writes ``w5.json`` under ``out_dir``."""

    out_dir: Path = field(default=RESULTS)
    name: str = "w5"
    markers: tuple[str, str] | None = MARKERS

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """W5's three batches on ``stack()`` (``quick`` changes nothing here); prints its section."""
        from dsmo.client.dsmo_client import DsmoClient

        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": "make bench W5=1"}
        async with stack() as (settings, _):
            await add_w5(results, settings, await DsmoClient.connect(settings))
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / "w5.json").write_text(json.dumps(results, indent=2, default=str))
        print(w5_text(results) or "W5 did not run")
        return results

    def section(self, results: dict[str, Any]) -> str | None:
        """W5's section; None when it did not run."""
        return w5_text(results)
