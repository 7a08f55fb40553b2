"""Where the bench reads and writes: the repository, BENCHMARKS.md, the results folder, the charts."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = REPO / "BENCHMARKS.md"
RESULTS = REPO / "bench" / "results"
CHARTS = REPO / "docs" / "bench"
