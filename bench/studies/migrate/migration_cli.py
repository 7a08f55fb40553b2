"""The migration section within the full bench (`make bench`); `study.Migrate` runs it alone (`MIGRATE=1`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.sections import splice
from bench.studies.migrate.migration_report import END, START
from dsmo.config.settings import Settings

MARKERS = START, END  # the section's markers in BENCHMARKS.md


async def add_migration(results: dict[str, Any], settings: Settings, dsmo: Any, runs: int, out_dir: Path) -> None:
    """Run the section with ``runs`` waiting runs and add its figures to ``results["migration"]``.

    The batch's own report goes to its file (see `migration_report.save`); ``results`` names it.
    A failure is printed and leaves the rest of the benchmark's results as they are.
    """
    from bench.studies.migrate.migration_bench import migration_bench
    from bench.studies.migrate.migration_report import save

    print(f"migration: {runs} waiting runs moved to a new version in one batch", flush=True)
    try:
        figures = await migration_bench(settings, dsmo, runs)
    except Exception as err:  # noqa: BLE001 - report the rest of the benchmark anyway
        print(f"migration section failed: {type(err).__name__}: {err}", flush=True)
        return
    paths = save(figures, out_dir, results["started_at"])
    figures.pop("batch_report")
    results["migration"] = figures | {"batch_report_file": paths["batch"].name}


def with_section(page: str, results: dict[str, Any]) -> str:
    """BENCHMARKS.md's text with the migration section of ``results`` in place (as it was if none)."""
    section = migration_section(results)
    return splice(page, section, *MARKERS) if section else page


def migration_section(results: dict[str, Any]) -> str | None:
    """The section's text from a bench's ``results``; None when the section did not run."""
    from bench.studies.migrate.migration_report import section

    if not results.get("migration"):
        return None
    return section(results["migration"], results["command"], results["started_at"], results["machine"])
