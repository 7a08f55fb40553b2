"""The paper's metrics (sections 2.5.3 and 2.6), each with its formula. Pure functions over
per-run records, so they are unit-tested on hand-made data.

A run record (`RunRecord`) holds: the sequence of states (every attempt, as stage and outcome),
the collapsed path (the stages completed, in order), whether the run ended in terminal success
(its terminal stage completed, nothing dead-lettered), and counts of duplicates, orphan
executions (by both rules), dead letters and events.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass
class RunRecord:
    run_id: str
    input_id: str  # runs with the same input_id are replays of one another
    replay: bool  # False for the original run of an input
    path: list[str] = field(default_factory=list)
    success: bool = False
    latency_s: float = 0.0
    duplicates: int = 0  # stage completions for a stage that had already completed in this run
    orphans: int = 0  # stage executions not on the run's valid trajectory
    dlq: int = 0  # dead letters written
    events: int = 0  # audit/log events recorded for the run
    bytes_stored: int = 0  # history + artifacts + audit
    orphans_lineage: int = 0  # stage executions whose lineage is not a valid trajectory's, or late
    unlinked: int = 0  # stage executions whose lineage is not a prefix of the accepted trajectory
    late: int = 0  # stage executions that started after the run ended
    attempts: list[str] = field(default_factory=list)  # the sequence of states: stage:outcome, in order
    valid_path: bool = False  # the collapsed path is the input's valid trajectory
    retries: list[tuple[str, float]] = field(default_factory=list)  # (what failed, seconds to the next attempt)

    @property
    def terminal(self) -> str | None:
        return self.path[-1] if self.path else None


def _groups(records: Sequence[RunRecord]) -> dict[str, tuple[RunRecord | None, list[RunRecord]]]:
    groups: dict[str, tuple[RunRecord | None, list[RunRecord]]] = {}
    for record in records:
        original, replays = groups.get(record.input_id, (None, []))
        if record.replay:
            replays.append(record)
        else:
            original = record
        groups[record.input_id] = (original, replays)
    return groups


def success_rate(records: Sequence[RunRecord]) -> float:
    """Base success rate = runs that reached terminal success / runs (originals only)."""
    originals = [r for r in records if not r.replay]
    return sum(r.success for r in originals) / len(originals) if originals else math.nan


def sps(records: Sequence[RunRecord]) -> float:
    """State-path stability (the paper's) = replays whose sequence of states (every attempt, as
    stage and outcome, retries and failures included) equals their original's / replays."""
    return _same_as_original(records, lambda record: record.attempts)


def sps_path(records: Sequence[RunRecord]) -> float:
    """SPS over the collapsed path (completions only, a repeat right after itself counted once)."""
    return _same_as_original(records, lambda record: record.path)


def _same_as_original(records: Sequence[RunRecord], key: Callable[[RunRecord], list[str]]) -> float:
    hits = total = 0
    for original, replays in _groups(records).values():
        if original is None:
            continue
        hits += sum(key(replay) == key(original) for replay in replays)
        total += len(replays)
    return hits / total if total else math.nan


def valid_path_rate(records: Sequence[RunRecord]) -> float:
    """Runs whose collapsed path is their input's valid trajectory / runs (originals and replays)."""
    return sum(r.valid_path for r in records) / len(records) if records else math.nan


def rsr(records: Sequence[RunRecord]) -> float:
    """Replay success rate = replays that reached terminal success / replays."""
    replays = [r for r in records if r.replay]
    return sum(r.success for r in replays) / len(replays) if replays else math.nan


def divergence(records: Sequence[RunRecord]) -> float:
    """Divergence score = mean over replays of 1 if the terminal stage differs from the original's, else 0."""
    scores = []
    for original, replays in _groups(records).values():
        if original is not None:
            scores += [float(replay.terminal != original.terminal) for replay in replays]
    return sum(scores) / len(scores) if scores else math.nan


def per_run(records: Sequence[RunRecord], attribute: str) -> float:
    """Mean of a count over all runs (originals and replays): duplicates, orphans, DLQ, events, bytes."""
    return sum(getattr(r, attribute) for r in records) / len(records) if records else math.nan


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def latency(records: Sequence[RunRecord]) -> dict[str, float]:
    values = [r.latency_s for r in records]
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "mean": sum(values) / len(values) if values else math.nan,
    }


def throughput(runs: int, seconds: float) -> float:
    """Runs per minute over the wall-clock time the runs took."""
    return runs / seconds * 60 if seconds > 0 else math.nan


def summarize(records: Sequence[RunRecord], wall_seconds: float) -> dict[str, float]:
    lat = latency(records)
    return {
        "success_rate": success_rate(records),
        "sps": sps(records),
        "sps_path": sps_path(records),
        "rsr": rsr(records),
        "valid_path_rate": valid_path_rate(records),
        "divergence": divergence(records),
        "duplicates_per_run": per_run(records, "duplicates"),
        "orphans_per_run": per_run(records, "orphans"),
        "orphans_lineage_per_run": per_run(records, "orphans_lineage"),
        "unlinked_per_run": per_run(records, "unlinked"),
        "late_per_run": per_run(records, "late"),
        "dlq_per_run": per_run(records, "dlq"),
        "latency_p50_s": lat["p50"],
        "latency_p95_s": lat["p95"],
        "latency_mean_s": lat["mean"],
        "events_per_run": per_run(records, "events"),
        "bytes_per_run": per_run(records, "bytes_stored"),
        "throughput_runs_per_min": throughput(len(records), wall_seconds),
        "runs": float(len(records)),
    }
