"""Writing one section of `make bench` on its own: its results file and its part of BENCHMARKS.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.report import file_stamp
from bench.sections import write_section


def publish_section(
    results: dict[str, Any],
    *,
    name: str,
    text: str | None,
    markers: tuple[str, str],
    out_dir: Path,
    page: Path | None,
) -> Path:
    """Save one section's results as ``<name>-<stamp>.json``, print its text, and with ``page``
    (BENCHMARKS.md) put the text between its ``markers`` there. The results file's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}-{file_stamp(results['started_at'])}.json"
    path.write_text(json.dumps(results, indent=2, default=str))
    print(text or f"the {name} section did not run")
    print(f"\nresults: {path}")
    if page is not None and text:
        write_section(text, markers, page)
    return path
