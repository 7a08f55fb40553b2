"""The reliability report: its table, and its section surviving a `make bench` rewrite of BENCHMARKS.md."""

from __future__ import annotations

from typing import Any

from bench.reliability import report


def row(scenario: str, lost: int = 0) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "fault": f"{scenario} at 40% of the stages",
        "runs": 100,
        "inFlight": 61,
        "completed": 100,
        "failed": 0,
        "reExecuted": 3,
        "lost": lost,
        "duplicates": 0,
        "orphans": 0,
        "brokenTrails": 0,
        "deadLetters": 0,
        "downtimeS": 1.5,
        "recoverS": 12.25,
    }


def results() -> dict[str, Any]:
    return {
        "command": "make reliability",
        "started_at": "2026-11-22T03:00:00+00:00",
        "seconds": 321.0,
        "machine": "2 cores",
        "scenarios": [row("worker killed"), row("S3 stopped", lost=2)],
    }


def test_table_has_a_row_per_scenario_in_column_order() -> None:
    lines = report.table(results()["scenarios"]).splitlines()
    assert lines[0].startswith("| Scenario | Runs | Open at fault | Completed |")
    assert lines[2] == "| worker killed | 100 | 61 | 100 | 0 | 3 | 0 | 0 | 0 | 0 | 0 | 1.5 | 12.25 |"
    assert lines[3].split(" | ")[6] == "2"  # the lost column of the S3 row
    assert "- **S3 stopped**: S3 stopped at 40% of the stages." in lines


def test_splice_appends_then_replaces_the_section() -> None:
    first = report.splice("# Benchmarks\n\nTable 1 ...\n", report.section(results()))
    assert first.startswith("# Benchmarks\n\nTable 1 ...\n\n" + report.START)
    assert first.count(report.START) == 1 and first.rstrip().endswith(report.END)
    changed = results() | {"seconds": 99.0}
    second = report.splice(first + "\n## Later section\n", report.section(changed))
    assert second.count(report.START) == 1
    assert "(99.0 s)" in second and "(321.0 s)" not in second
    assert second.endswith("## Later section\n")


def test_existing_section_is_kept_across_a_page_rewrite() -> None:
    page = report.splice("# Benchmarks\n\nold tables\n", report.section(results()))
    kept = report.existing(page)
    assert kept is not None and "| worker killed |" in kept
    rewritten = report.splice("# Benchmarks\n\nnew tables\n", kept)
    assert "new tables" in rewritten and "old tables" not in rewritten
    assert report.existing(rewritten) == kept
    assert report.existing("# Benchmarks\n") is None
