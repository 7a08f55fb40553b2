"""Reading a run's trail as the run now stands: its current line, the outputs a re-execution
reuses and the model calls a replay answers from, each keyed by (node, visit, committed attempt).

A run that went back to an earlier node (`RUN_REWOUND`) keeps in its trail what it did after
that node the first time; from the rewind on, that part is no longer the run's current line.
Each `RUN_REWOUND` names where it cut the line (``cutFrom``): the events from there up to the
rewind are left out here, so a replay, fork or later rewind follows what the run did last.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from dsmo.activities.artifacts import ARTIFACT_PREFIX
from dsmo.workflows.contracts.replay_plan import RecordedVisit
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


# What a run records between taking a rewind and getting back to its node: the undo of its later
# saga steps, the hand-over to its next generation, and events kept for the waits ahead.
_WHILE_GOING_BACK = {
    "COMPENSATION_STARTED",
    "COMPENSATION_SUCCEEDED",
    "COMPENSATION_FAILED",
    "RUN_CONTINUED",
    "EVENT_RECEIVED",
    "EVENT_BUFFERED",
    "EVENT_REJECTED",
    "DUPLICATE_IGNORED",
}


def going_back_to(line: list[AuditEvent]) -> str | None:
    """The node a rewind is taking the run back to, while it has not got there; else None.

    Args:
        line: The run's current line (`current_line`) of a run that has not ended.

    Returns:
        The node, or None when the run's last rewind (if any) is over.
    """
    rewound = next((index for index in range(len(line) - 1, -1, -1) if line[index].type == "RUN_REWOUND"), None)
    if rewound is None or any(event.type not in _WHILE_GOING_BACK for event in line[rewound + 1 :]):
        return None
    return line[rewound].stage or str(line[rewound].data.get("toNode"))


def visit_key(node: str, visit: int) -> str:
    """A stage visit's key, as the workflow names its folder: ``X`` for the first, ``X.vN`` for the Nth."""
    return node if visit == 1 else f"{node}.v{visit}"


def stage_visits(events: Iterable[AuditEvent]) -> list[tuple[str, AuditEvent]]:
    """Each stage visit that committed, in order: its key (`visit_key`) and its `STAGE_SUCCEEDED`.

    A visit begins with its first attempt's `STAGE_ENQUEUED`; its `STAGE_SUCCEEDED` names the
    attempt it committed (``attempt``) and that attempt's output (``artifact_uris[0]``). Saga
    actions (`invoke`) are not stages: they have no output artifact.
    """
    visits: dict[str, int] = {}
    found: list[tuple[str, AuditEvent]] = []
    for event in events:
        stage = event.stage
        if stage is None:
            continue
        if event.type == "STAGE_ENQUEUED" and event.attempt == 1:
            visits[stage] = visits.get(stage, 0) + 1
        elif event.type == "STAGE_SUCCEEDED" and event.artifact_uris and "action" not in event.data:
            found.append((visit_key(stage, visits.get(stage, 1)), event))
    return found


def reused_outputs(definition: AgentDefinition, events: Iterable[AuditEvent], before: str | None) -> dict[str, str]:
    """The committed stage outputs from before the run first entered ``before`` (None: all of
    them), for a re-execution to reuse.

    Keyed by the visit they belong to: ``X`` for stage X's first visit, ``X.vN`` for its Nth
    (a visit begins with its first attempt's `STAGE_ENQUEUED`).
    """
    line = list(events)
    if before is not None:
        cut = next((index for index, event in enumerate(line) if event.stage == before), len(line))
        line = line[:cut]
    return {
        key: event.artifact_uris[0]
        for key, event in stage_visits(line)
        if isinstance(definition.nodes.get(str(event.stage)), RunAgentNode | LlmNode)
    }


def recorded_llm_visits(
    definition: AgentDefinition, events: Iterable[AuditEvent], store_uri: Callable[[str], str]
) -> dict[str, RecordedVisit]:
    """Where each `llm` stage visit of a run keeps its model calls, for a replay to answer from.

    A committed visit is read at the attempt it committed (a retried one: not the replay's own
    attempt number, which found nothing where an attempt was killed before it recorded a call),
    under the version and run that wrote it. A visit that never committed (its answers broke the
    schema, say) is read attempt by attempt, as the replay makes them.

    Args:
        definition: The original's definition (which nodes are `llm` stages).
        events: The original's trail, as it now stands (`current_line`).
        store_uri: The store's URI of an object key.
    """
    found: dict[str, RecordedVisit] = {}
    visits: dict[str, int] = {}
    for event in events:
        stage = event.stage
        if stage is None or not isinstance(definition.nodes.get(stage), LlmNode):
            continue
        if event.type == "STAGE_ENQUEUED" and event.attempt == 1:
            visits[stage] = visits.get(stage, 0) + 1
            key = visit_key(stage, visits[stage])
            folder = f"{ARTIFACT_PREFIX}{event.workflow_version}/{event.run_id}/{key}/"
            found[key] = RecordedVisit(folder=store_uri(folder))
        elif event.type == "STAGE_SUCCEEDED" and event.artifact_uris:
            key = visit_key(stage, visits.get(stage, 1))
            match = _COMMITTED.search(event.artifact_uris[0])
            if match is not None:  # the folder of the run that wrote it (a reused output's too)
                found[key] = RecordedVisit(folder=match.group("folder"), committed=int(match.group("attempt")))
    return found


_COMMITTED = re.compile(r"^(?P<folder>.+/)attempt=(?P<attempt>\d+)/output\.json$")
