"""The reliability table: printed, saved as JSON, and spliced into BENCHMARKS.md."""

from __future__ import annotations

from typing import Any

from bench import sections

START, END = "<!-- reliability:start -->", "<!-- reliability:end -->"
COLUMNS = (
    ("scenario", "Scenario"),
    ("runs", "Runs"),
    ("inFlight", "Open at fault"),
    ("completed", "Completed"),
    ("failed", "Failed"),
    ("reExecuted", "Stages re-executed (absorbed)"),
    ("lost", "Lost"),
    ("duplicates", "Duplicates applied"),
    ("orphans", "Orphans"),
    ("brokenTrails", "Broken audit chains"),
    ("deadLetters", "Dead letters"),
    ("downtimeS", "Down (s)"),
    ("recoverS", "Recover (s)"),
)


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| " + " | ".join(title for _, title in COLUMNS) + " |",
        "|" + "|".join("---" if key == "scenario" else "---:" for key, _ in COLUMNS) + "|",
    ]
    lines += ["| " + " | ".join(str(row[key]) for key, _ in COLUMNS) + " |" for row in rows]
    faults = [f"- **{row['scenario']}**: {row['fault']}." for row in rows]
    return "\n".join(lines) + "\n\n" + "\n".join(faults)


def section(report: dict[str, Any]) -> str:
    return f"""{START}
## Reliability

Measured by `{report["command"]}` on {report["started_at"]} ({report["seconds"]} s), on
{report["machine"]}. Each scenario runs on a private embedded stack whose parts it breaks: the
worker process, the Temporal dev server (SQLite file) and SeaweedFS. Counts come from what the
outside world holds after recovery: each run's final record, the output artifacts and dead
letters in S3, the order database's effect log, the exported hash-chained audit trails and the
agent's own execution log (`bench/reliability/checks.py`). *Re-executed* stages are the
at-least-once executions a fault forces; they must be absorbed (no second artifact, row or
resume). *Down* is from the fault to the part answering again; *Recover* from then to every
run finished. `make reliability` reproduces it; CI runs the same scenarios with the smaller
counts of `tests/integration/platform/test_reliability.py`.

{table(report["scenarios"])}
{END}"""


def splice(page: str, new_section: str, start: str = START, end: str = END) -> str:
    """``page`` with its reliability section (or the one between ``start`` and ``end``) replaced
    by ``new_section``; appended if absent (see `bench.sections.splice`)."""
    return sections.splice(page, new_section, start, end)


def existing(page: str, start: str = START, end: str = END) -> str | None:
    """The section of ``page`` between ``start`` and ``end`` (default: reliability), kept when
    `make bench` rewrites the rest."""
    return sections.existing(page, start, end)
