"""Where B3's overhead over raw Temporal goes: artifact I/O, the contract's search attributes,
then the orchestration itself."""

from __future__ import annotations

from typing import Any

ROLES = {"python": "bench process", "temporal": "Temporal server", "s3": "S3 store"}


def breakdown_table(floor: dict[str, Any]) -> list[str]:
    """B3 beside the floors; results written before a floor existed leave its column out."""
    floor_io, b3 = floor.get("floor_io"), floor.get("b3")
    if not floor_io or not b3:
        return []
    floor_io_sa = floor.get("floor_io_sa")
    io = floor["io_ratios"]
    sides = [floor, floor_io, *([floor_io_sa] if floor_io_sa else []), b3]
    names = ["Raw Temporal floor", "Floor + artifact I/O"]
    names += ["Floor + I/O + search attributes"] if floor_io_sa else []
    names += ["DSMO (B3)", "I/O / floor"]
    names += ["SA / (floor + I/O)", "B3 / (floor + I/O + SA)"] if floor_io_sa else []
    names += ["B3 / (floor + I/O)"]

    def ratios(io_key: str, sa_key: str, b3_sa_key: str, b3_key: str) -> list[float]:
        """The ratio columns of one row, the search-attribute pair only when that side ran."""
        return [io[io_key], *([io[sa_key], io[b3_sa_key]] if floor_io_sa else []), io[b3_key]]

    lines = [
        "",
        "| Where B3's overhead goes | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
        _row(
            "W1 latency p50 (s)",
            [side["W1"]["p50"] for side in sides],
            ratios("w1_p50_io", "w1_p50_sa", "w1_p50_b3_sa", "w1_p50_b3"),
            "{:.3f}",
        ),
        _row(
            "W4 throughput (runs/min)",
            [side["W4"]["throughput"] for side in sides],
            ratios("w4_throughput_io", "w4_throughput_sa", "w4_throughput_b3_sa", "w4_throughput_b3"),
            "{:,.0f}",
        ),
    ]
    spent = [side["W4"].get("cpu_ms_per_run", {}) for side in sides]
    if all(spent):
        totals = [sum(values.values()) for values in spent]
        steps = [totals[index + 1] / totals[index] for index in range(len(totals) - 1)]
        if floor_io_sa:  # I/O over the floor, SA over I/O, B3 over SA, then B3 over I/O
            steps.append(totals[-1] / totals[1])
        lines.append(_row("W4 CPU ms per run, whole stack", totals, steps, "{:.1f}"))
        for role, name in ROLES.items():
            if all(role in values for values in spent):
                cells = " | ".join(f"{values[role]:.1f}" for values in spent)
                lines.append(f"| W4 CPU ms per run, {name} | {cells} |" + "  |" * (len(names) - len(sides)))
    return lines


def _row(label: str, values: list[float], ratios: list[float], pattern: str) -> str:
    cells = " | ".join(pattern.format(value) for value in values)
    return f"| {label} | {cells} | " + " | ".join(f"{ratio:.2f}x" for ratio in ratios) + " |"
