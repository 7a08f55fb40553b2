"""B3's lineage, read from its audit trail: which execution each stage attempt was scheduled after.

DSMO's orchestrator schedules a stage's attempt (`STAGE_ENQUEUED`) only after it accepted the
output of the stage before (`STAGE_SUCCEEDED`, naming the attempt it committed), so the parent
of an attempt is the last accepted execution before its scheduling event; the accepted
executions are the committed attempts, and the run ended at its last event (`RUN_COMPLETED` or
`RUN_ABORTED`). The queue's agents log their parents themselves (`bench.consumer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bench.agents import execution_id
from bench.shared_rule import ROOT

UNSCHEDULED = "unscheduled"  # the parent of an execution no scheduling event names: never linked
ENDINGS = ("RUN_COMPLETED", "RUN_ABORTED")


@dataclass
class ScheduledLineage:
    """A B3 run's parents, accepted executions and end, by execution id (`bench.agents.execution_id`)."""

    parents: dict[str, str] = field(default_factory=dict)
    accepted: set[str] = field(default_factory=set)
    ended_at: float | None = None


def scheduled_lineage(trail: Sequence[dict[str, Any]]) -> ScheduledLineage:
    """Read a run's lineage from its exported trail (events in order)."""
    found = ScheduledLineage()
    last_accepted = ROOT
    for event in sorted(trail, key=lambda e: int(e.get("seq", 0))):
        kind, stage, attempt = event.get("type"), event.get("stage"), event.get("attempt")
        if kind == "STAGE_ENQUEUED" and stage is not None and attempt is not None:
            found.parents[execution_id(stage, int(attempt))] = last_accepted
        elif kind == "STAGE_SUCCEEDED" and stage is not None and attempt is not None:
            last_accepted = execution_id(stage, int(attempt))
            found.accepted.add(last_accepted)
        elif kind in ENDINGS:
            found.ended_at = datetime.fromisoformat(str(event["at"]).replace("Z", "+00:00")).timestamp()
    return found
