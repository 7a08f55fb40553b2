"""The migration section as `make bench` runs it: within the full bench, or alone (`MIGRATE=1`)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.migration_report import END, START
from bench.paths import RESULTS
from bench.report import machine
from bench.runner import BenchConfig
from bench.sections import splice, write_section
from bench.stack import Stack
from dsmo.config.settings import Settings

OUT_DIR = RESULTS
MARKERS = START, END  # the section's markers in BENCHMARKS.md


async def add_migration(results: dict[str, Any], settings: Settings, dsmo: Any, runs: int, out_dir: Path) -> None:
    """Run the section with ``runs`` waiting runs and add its figures to ``results["migration"]``.

    The batch's own report goes to its file (see `migration_report.save`); ``results`` names it.
    A failure is printed and leaves the rest of the benchmark's results as they are.
    """
    from bench.migration_bench import migration_bench
    from bench.migration_report import save

    print(f"migration: {runs} waiting runs moved to a new version in one batch", flush=True)
    try:
        figures = await migration_bench(settings, dsmo, runs)
    except Exception as err:  # noqa: BLE001 - report the rest of the benchmark anyway
        print(f"migration section failed: {type(err).__name__}: {err}", flush=True)
        return
    paths = save(figures, out_dir, results["started_at"])
    figures.pop("batch_report")
    results["migration"] = figures | {"batch_report_file": paths["batch"].name}


async def migration_only(quick: bool, stack: Stack, *, update_benchmarks: bool) -> dict[str, Any]:
    """Run just the migration section on ``stack()`` (the bench's: the running stack, else a private one).

    With ``update_benchmarks``, only its section of BENCHMARKS.md is rewritten.
    """
    from dsmo.client.dsmo_client import DsmoClient

    config = BenchConfig() if quick else BenchConfig.full()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    command = "make bench MIGRATE=1" + (" QUICK=1" if quick else "")
    results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": command}
    async with stack() as (settings, _):
        await add_migration(results, settings, await DsmoClient.connect(settings), config.migration_runs, OUT_DIR)
    section = migration_section(results)
    print(section or "the migration section did not run")
    if update_benchmarks and section:
        write_section(section, MARKERS)
    return results


def with_section(page: str, results: dict[str, Any]) -> str:
    """BENCHMARKS.md's text with the migration section of ``results`` in place (as it was if none)."""
    section = migration_section(results)
    return splice(page, section, *MARKERS) if section else page


def migration_section(results: dict[str, Any]) -> str | None:
    """The section's text from a bench's ``results``; None when the section did not run."""
    from bench.migration_report import section

    if not results.get("migration"):
        return None
    return section(results["migration"], results["command"], results["started_at"], results["machine"])
