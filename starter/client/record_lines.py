"""Reading a run's trail as the run now stands: its current line, and the outputs a re-execution reuses.

A run that went back to an earlier node (`RUN_REWOUND`) keeps in its trail what it did after
that node the first time; from the rewind on, that part is no longer the run's current line.
Each `RUN_REWOUND` names where it cut the line (``cutFrom``): the events from there up to the
rewind are left out here, so a replay, fork or later rewind follows what the run did last.
"""

from __future__ import annotations

from collections.abc import Iterable

from dsmo.workflows.contracts.run_records import AuditEvent
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.definition.node_types import LlmNode, RunAgentNode


def current_line(events: Iterable[AuditEvent]) -> list[AuditEvent]:
    """The trail without the parts rewinds left behind (the whole trail for a run never rewound)."""
    line: list[AuditEvent] = []
    for event in events:
        if event.type == "RUN_REWOUND" and isinstance(event.data.get("cutFrom"), int):
            cut = event.data["cutFrom"]
            line = [kept for kept in line if kept.seq < cut]
        line.append(event)
    return line


def reused_outputs(definition: AgentDefinition, events: Iterable[AuditEvent], before: str) -> dict[str, str]:
    """The committed stage outputs from before the run first entered ``before``, for a re-execution to reuse.

    Keyed by the visit they belong to: ``X`` for stage X's first visit, ``X.vN`` for its Nth
    (a visit begins with its first attempt's `STAGE_ENQUEUED`).
    """
    reuse: dict[str, str] = {}
    visits: dict[str, int] = {}
    for event in events:
        stage = event.stage
        if stage == before:
            break
        if stage is None or not isinstance(definition.nodes.get(stage), RunAgentNode | LlmNode):
            continue
        if event.type == "STAGE_ENQUEUED" and event.attempt == 1:
            visits[stage] = visits.get(stage, 0) + 1
        elif event.type == "STAGE_SUCCEEDED" and event.artifact_uris:
            visit = visits.get(stage, 1)
            reuse[stage if visit == 1 else f"{stage}.v{visit}"] = event.artifact_uris[0]
    return reuse
