"""The what-if section as `make bench` runs it: within the full bench, or alone (`WHATIF=1`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bench.migration_cli import OUT_DIR
from bench.report import machine
from bench.runner import BenchConfig
from bench.sections import splice, write_section
from bench.stack import Stack
from bench.what_if_report import END, START
from dsmo.config.settings import Settings

MARKERS = START, END  # the section's markers in BENCHMARKS.md


async def add_what_if(
    results: dict[str, Any], settings: Settings, dsmo: Any, runs: int, *, own_stack: bool | None = None
) -> None:
    """Run the section with a corpus of ``runs`` runs and add its figures to ``results["what_if"]``.

    ``own_stack`` says whether the bench started the Temporal server and S3 store itself (True)
    or reused a running one that other jobs may use too (False); the section says which.

    The figures are also written to their own file (see `what_if_report.save`). A failure is
    printed and leaves the rest of the benchmark's results as they are.
    """
    from bench.what_if_bench import what_if_bench
    from bench.what_if_report import save

    print(f"what-if: {runs} ended runs replayed against a candidate version", flush=True)
    try:
        figures = await what_if_bench(settings, dsmo, runs)
    except Exception as err:  # noqa: BLE001 - report the rest of the benchmark anyway
        print(f"what-if section failed: {type(err).__name__}: {err}", flush=True)
        return
    figures["own_stack"] = own_stack
    save(figures, OUT_DIR, results["started_at"])
    results["what_if"] = figures


async def what_if_only(quick: bool, stack: Stack, *, update_benchmarks: bool) -> dict[str, Any]:
    """Run just the what-if section on ``stack()`` (the bench's: the running stack, else a private one).

    With ``update_benchmarks``, only its section of BENCHMARKS.md is rewritten.
    """
    from dsmo.client.dsmo_client import DsmoClient

    config = BenchConfig() if quick else BenchConfig.full()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    command = "make bench WHATIF=1" + (" QUICK=1" if quick else "")
    results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": command}
    async with stack() as (settings, started):
        dsmo = await DsmoClient.connect(settings)
        await add_what_if(results, settings, dsmo, config.what_if_runs, own_stack=started is not None)
    section = what_if_section(results)
    print(section or "the what-if section did not run")
    if update_benchmarks and section:
        write_section(section, MARKERS)
    return results


def with_section(page: str, results: dict[str, Any]) -> str:
    """BENCHMARKS.md's text with the what-if section of ``results`` in place (as it was if none;
    at the end if the page has none yet)."""
    section = what_if_section(results)
    return splice(page, section, START, END) if section else page


def what_if_section(results: dict[str, Any]) -> str | None:
    """The section's text from a bench's ``results``; None when the section did not run."""
    from bench.what_if_report import section

    if not results.get("what_if"):
        return None
    return section(results["what_if"], results["command"], results["started_at"], results["machine"])
