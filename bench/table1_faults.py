"""The real faults each mode of Table 1 went through: executor processes killed, and servers restarted.

Every mode's stage executors are processes a crash point SIGKILLs (B3's worker; the queue modes'
consumers), started again a second later; in W3 and W4 each mode's server is restarted
mid-workload (`bench.restarts`). The experiment counts both per workload and mode
(``faults`` in its results); this module sums them for the table and its JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

COUNTED = ("kills", "deaths", "server_restarts")
LABELS = {
    "kills": "Executor processes SIGKILLed at crash points (each started again 1 s later)",
    "deaths": "Executor process deaths, any cause",
    "server_restarts": "Server restarts mid-W3 and mid-W4 (B3: Temporal; the others: the queue's PostgreSQL)",
}


def totals(workloads: dict[str, Any]) -> dict[str, dict[str, int]]:
    """mode -> each count of `COUNTED`, summed over ``workloads`` (one repetition's results)."""
    found: dict[str, dict[str, int]] = {}
    for modes in workloads.values():
        for mode, measured in modes.items():
            faults = measured.get("faults") if isinstance(measured, dict) and mode != "pairing" else None
            if faults is None:
                continue
            counts = found.setdefault(mode, dict.fromkeys(COUNTED, 0))
            for key in COUNTED:
                counts[key] += int(faults.get(key, 0))
    return found


def skipped(workloads: dict[str, Any]) -> list[str]:
    """Why a planned restart did not happen, once per reason (e.g. a stack the bench did not start)."""
    reasons = []
    for modes in workloads.values():
        for mode, measured in modes.items():
            restart = measured.get("faults", {}).get("restart") if mode != "pairing" else None
            if restart and restart.get("down_s") is None and restart.get("reason") not in reasons:
                reasons.append(str(restart.get("reason")))
    return reasons


def fault_rows(results: dict[str, Any], modes: Sequence[str]) -> list[str]:
    """Table 1's rows of real faults, one cell a mode: the sum over repetitions, each in brackets
    when there were several. Empty for results from before these counts."""
    repeats: list[dict[str, dict[str, int]]] = results.get("faults") or []
    if not repeats:
        return []
    rows = []
    for key in COUNTED:
        cells = []
        for mode in modes:
            values = [repeat.get(mode, {}).get(key, 0) for repeat in repeats]
            each = f" ({' + '.join(str(value) for value in values)})" if len(values) > 1 else ""
            cells.append(f"{sum(values)}{each}")
        rows.append(f"| {LABELS[key]} | {' | '.join(cells)} | |")
    executors = results.get("config", {}).get("executors")
    if executors:
        shape = " | ".join(
            f"{executors} (one worker process, {executors} activity slots)"
            if mode == "B3"
            else f"{executors} (consumer processes, one stage at a time)"
            for mode in modes
        )
        rows.append(f"| Stage executors | {shape} | |")
    return rows


def downtimes(workloads: dict[str, Any], server: str) -> list[float]:
    """How long ``server`` was away at each of its restarts in ``workloads`` (seconds)."""
    found = []
    for modes in workloads.values():
        for mode, measured in modes.items():
            restart = measured.get("faults", {}).get("restart") if mode != "pairing" else None
            if restart and restart.get("server") == server and restart.get("down_s") is not None:
                found.append(float(restart["down_s"]))
    return found


def real_faults(results: dict[str, Any], names: dict[str, str]) -> str:
    """A bullet for the notes: what each mode went through, and what it means for its figures."""
    repeats: list[dict[str, dict[str, int]]] = results.get("faults") or []
    if not repeats:
        return "- **Real faults were not counted in these results** (they predate the count)."
    summed = {
        mode: {key: sum(repeat.get(mode, {}).get(key, 0) for repeat in repeats) for key in COUNTED}
        for mode in repeats[0]
    }
    met = "; ".join(
        f"{names.get(mode, mode)}: {counts['kills']} processes killed, {counts['server_restarts']} server restarts"
        for mode, counts in summed.items()
    )
    temporal, postgres = downtimes(results["workloads"], "temporal"), downtimes(results["workloads"], "postgres")
    away = ", ".join(
        f"{server} away {min(values):.1f}-{max(values):.1f} s"
        for server, values in (("Temporal", temporal), ("PostgreSQL", postgres))
        if values
    )
    reasons = skipped(results["workloads"])
    return (
        f"- **Every mode met real faults** (over W1-W4 and the repetitions): {met}"
        + (f" ({away}, in the published repetition)" if away else "")
        + ". A B3 crash kills the worker process with every stage in flight on it, so one draw costs "
        "B3 more executions than it costs a queue mode, where one single-threaded consumer dies, and "
        "which runs lose an attempt beside it differs between an original and its replay (B3's SPS "
        "shows it). The runs the dead process held wait for their workflow tasks to time out on its "
        "sticky queue (the SDK's default, 10 s) before the new process takes them: B3's latency tail "
        "shows that. Executions killed before they logged leave no row."
        + (f" Temporal was not restarted: {'; '.join(reasons)}." if reasons else "")
    )
