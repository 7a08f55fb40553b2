"""What a scenario counts after the fault, from observable results only.

A run's truth is its own record (status and the path of nodes it took); against it we count
what the outside world holds: output artifacts and dead letters in S3, rows in the order
database, the exported audit trail, and the agent's execution log.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from dsmo.activities.artifacts import ArtifactMissing, ArtifactStore
from dsmo.activities.audit_log import audit_key, verify_lines
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import ExecutionResult
from dsmo_examples.orders.db import OrderDatabase

_OUTPUT = re.compile(r"/(?P<stage>[^/]+(?:/[^/]+)*)/attempt=\d+/output\.json$")


@dataclass
class Tally:
    """Counts over a set of runs; every field but the first three should be zero after a fault."""

    completed: int = 0
    failed: int = 0
    re_executions: int = 0  # stage executions repeated after a fault: expected, and absorbed
    lost: int = 0  # runs that never reached a terminal state, or effects a finished run lacks
    duplicates: int = 0  # effects applied more than once: artifacts, rows, resumes
    orphans: int = 0  # effects or executions for stages the run never took
    broken_trails: int = 0  # exported audit trails whose hash chain does not verify
    problems: list[str] = field(default_factory=list)

    def flag(self, kind: str, run_id: str, detail: str, count: int = 1) -> None:
        setattr(self, kind, getattr(self, kind) + count)
        if len(self.problems) < 20:
            self.problems.append(f"{run_id}: {detail}")


def executions(log_path: Path) -> Counter[tuple[str, str]]:
    """(run, stage) -> how many times the slow agent started it, across worker processes."""
    counts: Counter[tuple[str, str]] = Counter()
    if log_path.exists():
        for line in log_path.read_text().splitlines():
            record = json.loads(line)
            counts[(record["run"], record["stage"])] += 1
    return counts


def stage_outputs(store: ArtifactStore, workflow_version: str, run_id: str) -> Counter[str]:
    """Stage -> output artifacts stored for it (any attempt)."""
    counts: Counter[str] = Counter()
    for uri in store.list_uris(f"artifacts/{workflow_version}/{run_id}/"):
        match = _OUTPUT.search(uri.split(f"/{run_id}", 1)[1])
        if match:
            counts[match.group("stage")] += 1
    return counts


def check_run(
    tally: Tally,
    run_id: str,
    result: ExecutionResult | None,
    *,
    workflow_version: str,
    agent_nodes: set[str],
    effect_nodes: dict[str, str],
    store: ArtifactStore,
    db: OrderDatabase | None,
    executed: Counter[tuple[str, str]],
    resumes_expected: int = 0,
) -> None:
    """Count one run: its status, its artifacts, its database effects, its trail, its executions.

    ``effect_nodes`` maps an invoke node to the saga-log effect it writes (`create_order`, ...).
    """
    if result is None:
        tally.flag("lost", run_id, "never reached a terminal state")
        return
    if result.status is RunStatus.COMPLETED:
        tally.completed += 1
    else:
        tally.failed += 1
    took = set(result.path)

    outputs = stage_outputs(store, workflow_version, run_id)
    for stage, count in outputs.items():
        if stage not in took:
            tally.flag("orphans", run_id, f"output artifact for {stage}, a stage the run never took", count)
        elif count > 1:
            tally.flag("duplicates", run_id, f"{count} output artifacts for {stage}", count - 1)
    if result.status is RunStatus.COMPLETED:
        for stage in sorted((agent_nodes & took) - set(outputs)):
            tally.flag("lost", run_id, f"no output artifact for {stage}")

    if db is not None:
        effects = Counter(db.effects(run_id))
        for node, effect in effect_nodes.items():
            applied = effects[effect]
            if applied > 1:
                tally.flag("duplicates", run_id, f"{effect} applied {applied} times", applied - 1)
            if applied and node not in took:
                tally.flag("orphans", run_id, f"{effect} applied for {node}, a step the run never took")
            if not applied and node in took and result.status is RunStatus.COMPLETED:
                tally.flag("lost", run_id, f"{effect} never applied")

    for (run, stage), count in executed.items():
        if run != run_id:
            continue
        tally.re_executions += count - 1
        if stage not in took:
            tally.flag("orphans", run_id, f"agent executed for {stage}, a stage the run never took")

    trail = read_trail(store, run_id)
    if trail is None:
        tally.flag("lost", run_id, "no exported audit trail")
        return
    if not trail[0]:
        tally.flag("broken_trails", run_id, "exported audit trail does not verify")
    resumed = sum(1 for event in trail[1] if event.get("type") == "RUN_RESUMED")
    if resumed > resumes_expected:
        tally.flag("duplicates", run_id, f"resumed {resumed} times", resumed - resumes_expected)
    elif resumed < resumes_expected:
        tally.flag("lost", run_id, f"resumed {resumed} times, expected {resumes_expected}")


def read_trail(store: ArtifactStore, run_id: str) -> tuple[bool, list[dict[str, object]]] | None:
    """(chain verifies, events) of the exported trail, or None if there is none."""
    try:
        body = store.read_bytes(store.uri(audit_key(run_id)))
    except ArtifactMissing:
        return None
    events = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
    return verify_lines(body).ok, events


def dead_letters(store: ArtifactStore, run_id: str) -> int:
    return len(store.list_uris(f"dlq/{run_id}/"))
