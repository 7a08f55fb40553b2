"""Where B3's overhead over raw Temporal goes: artifact I/O, then the orchestration itself."""

from __future__ import annotations

from typing import Any

ROLES = {"python": "bench process", "temporal": "Temporal server", "s3": "S3 store"}


def breakdown_table(floor: dict[str, Any]) -> list[str]:
    """B3 beside both floors (results written before the artifact-I/O floor existed have none)."""
    floor_io, b3 = floor.get("floor_io"), floor.get("b3")
    if not floor_io or not b3:
        return []
    io = floor["io_ratios"]
    lines = [
        "",
        "| Where B3's overhead goes | Raw Temporal floor | Floor + artifact I/O | DSMO (B3) "
        "| I/O / floor | B3 / (floor + I/O) |",
        "|---|---|---|---|---|---|",
        _row("W1 latency p50 (s)", floor, floor_io, b3, "W1", "p50", io["w1_p50_io"], io["w1_p50_b3"], "{:.3f}"),
        _row(
            "W4 throughput (runs/min)",
            floor,
            floor_io,
            b3,
            "W4",
            "throughput",
            io["w4_throughput_io"],
            io["w4_throughput_b3"],
            "{:,.0f}",
        ),
    ]
    spent = [side["W4"].get("cpu_ms_per_run", {}) for side in (floor, floor_io, b3)]
    if all(spent):
        totals = [sum(values.values()) for values in spent]
        lines.append(
            "| W4 CPU ms per run, whole stack | "
            + " | ".join(f"{total:.1f}" for total in totals)
            + f" | {totals[1] / totals[0]:.2f}x | {totals[2] / totals[1]:.2f}x |"
        )
        for role, name in ROLES.items():
            if all(role in values for values in spent):
                lines.append(
                    f"| W4 CPU ms per run, {name} | "
                    + " | ".join(f"{values[role]:.1f}" for values in spent)
                    + " |  |  |"
                )
    return lines


def _row(
    label: str,
    floor: dict[str, Any],
    floor_io: dict[str, Any],
    b3: dict[str, Any],
    shape: str,
    key: str,
    io_ratio: float,
    b3_ratio: float,
    pattern: str,
) -> str:
    cells = " | ".join(pattern.format(side[shape][key]) for side in (floor, floor_io, b3))
    return f"| {label} | {cells} | {io_ratio:.2f}x | {b3_ratio:.2f}x |"
