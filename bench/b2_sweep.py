"""B2 at each share of runs whose agent decides otherwise: Table 1's share sweep.

B2's success, valid-path rate and orphans follow the share of runs that deviate, a parameter of
the bench (``ambiguity``; ``b2_sweep`` runs B2 again at other shares, each a mode ``B2sNN``), so the
report shows them at every share measured rather than as one finding.
"""

from __future__ import annotations

from typing import Any

from bench.table1 import ROWS, records_of


def sweep_mode(share: float) -> str:
    """The mode key of B2 at another share of deviating runs (``B2s05`` for 5%)."""
    return f"B2s{round(share * 100):02d}"


# B2's share sweep: the figures its share moves, at each share the run measured.
SWEPT = ("success_rate", "sps", "rsr", "valid_path_rate", "unlinked_per_run", "dlq_per_run", "latency_p50_s")


def sweep(results: dict[str, Any]) -> str:
    """B2 at each share of deviating runs (``b2_sweep`` beside ``ambiguity``), pooled over W1-W4."""
    shares = results.get("config", {}).get("b2_sweep") or ()
    if not shares:
        return ""
    columns = sorted([(results["config"]["ambiguity"], "B2"), *((share, sweep_mode(share)) for share in shares)])
    labels = {key: (label, pattern) for key, label, pattern, _ in ROWS}
    lines = [
        "| Metric | " + " | ".join(f"B2 at {share:.0%}" for share, _ in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    pooled_by = {
        mode: {key: metric(records_of(results, mode)) for key, _, _, metric in ROWS if metric and key in SWEPT}
        for _, mode in columns
    }
    for key in SWEPT:
        label, pattern = labels[key]
        lines.append(f"| {label} | " + " | ".join(pattern.format(pooled_by[mode][key]) for _, mode in columns) + " |")
    return "\n".join(lines)
