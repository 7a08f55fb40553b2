"""The what-if section within the full bench (`make bench`); `study.WhatIf` runs it alone (`WHATIF=1`)."""

from __future__ import annotations

from typing import Any

from bench.paths import RESULTS as OUT_DIR
from bench.sections import splice
from bench.studies.what_if.what_if_report import END, START
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
    from bench.studies.what_if.what_if_bench import what_if_bench
    from bench.studies.what_if.what_if_report import save

    print(f"what-if: {runs} ended runs replayed against a candidate version", flush=True)
    try:
        figures = await what_if_bench(settings, dsmo, runs)
    except Exception as err:  # noqa: BLE001 - report the rest of the benchmark anyway
        print(f"what-if section failed: {type(err).__name__}: {err}", flush=True)
        return
    figures["own_stack"] = own_stack
    save(figures, OUT_DIR, results["started_at"])
    results["what_if"] = figures


def with_section(page: str, results: dict[str, Any]) -> str:
    """BENCHMARKS.md's text with the what-if section of ``results`` in place (as it was if none;
    at the end if the page has none yet)."""
    section = what_if_section(results)
    return splice(page, section, START, END) if section else page


def what_if_section(results: dict[str, Any]) -> str | None:
    """The section's text from a bench's ``results``; None when the section did not run."""
    from bench.studies.what_if.what_if_report import section

    if not results.get("what_if"):
        return None
    return section(results["what_if"], results["command"], results["started_at"], results["machine"])
