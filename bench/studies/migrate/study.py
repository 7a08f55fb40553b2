"""The migration study behind the `Study` protocol: `python -m bench migrate` (`make bench MIGRATE=1`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.paths import RESULTS
from bench.report import machine
from bench.runner import BenchConfig
from bench.stack import Stack
from bench.studies.migrate.migration_cli import MARKERS, add_migration, migration_section


@dataclass
class Migrate:
    """10,000 waiting runs (300 quick) moved to a new version in one batch, and its section."""

    name: str = "migrate"
    markers: tuple[str, str] | None = MARKERS

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """The section alone on ``stack()`` (the running stack, else a private one); its results."""
        from dsmo.client.dsmo_client import DsmoClient

        config = BenchConfig() if quick else BenchConfig.full()
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        command = "make bench MIGRATE=1" + (" QUICK=1" if quick else "")
        results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": command}
        async with stack() as (settings, _):
            await add_migration(results, settings, await DsmoClient.connect(settings), config.migration_runs, RESULTS)
        print(migration_section(results) or "the migration section did not run")
        return results

    def section(self, results: dict[str, Any]) -> str | None:
        """The migration section; None when it did not run."""
        return migration_section(results)
