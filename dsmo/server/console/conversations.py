"""A tool-using `llm` node's conversation, turn by turn, as a run page shows it: what the model
called with which arguments, what each call returned (or why it was refused), and its answer.

Read from the trail and the records it points to (each turn's stage output, each call's record):
the conversation is never in the run's variables. A run whose data subject seals its records
shows the calls without their arguments and results.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from dsmo.runtime.storage import ArtifactErased, ArtifactMissing, ArtifactStore
from dsmo.workflows.contracts.run_records import AuditEvent

MAX_TURNS_SHOWN = 100  # of one page; the trail and the records hold the rest
SHOWN_CHARS = 2000  # of one argument list or result


@dataclass
class ToolCallShown:
    """One call of a turn: the tool, its arguments, and its result or why there is none."""

    tool: str
    arguments: str = ""
    result: str = ""
    refused: bool = False


@dataclass
class TurnShown:
    """One model turn of a node: its visit, the calls it made, or its answer."""

    node: str
    visit: str
    calls: list[ToolCallShown] = field(default_factory=list)
    answer: str = ""


def conversation(trail: list[AuditEvent], store: ArtifactStore) -> list[TurnShown]:
    """The turns of the run's tool-using nodes, in order (empty for a run without tools)."""
    if not any(event.type in ("TOOL_CALLED", "TOOL_REFUSED") for event in trail):
        return []
    # Content only when the trail's start is there and names no data subject: a subject's records
    # are sealed, and the store would open them.
    readable = bool(trail) and trail[0].type == "RUN_CREATED" and "subject" not in trail[0].data
    turns: list[TurnShown] = []
    visits: dict[str, int] = {}
    by_visit: dict[str, TurnShown] = {}
    for event in trail:
        if event.type == "STAGE_SUCCEEDED" and "llm" in event.data and event.stage and event.artifact_uris:
            visit = visits[event.stage] = visits.get(event.stage, 0) + 1
            key = event.stage if visit == 1 else f"{event.stage}.v{visit}"
            output = _read(store, event.artifact_uris[0]) if readable else None
            turn = TurnShown(event.stage, key)
            if output is not None and "toolCalls" not in output.get("output", {}):
                turn.answer = _shown(output.get("output"))
            by_visit[key] = turn
            turns.append(turn)
        elif event.type in ("TOOL_CALLED", "TOOL_REFUSED") and str(event.data.get("visit")) in by_visit:
            turn = by_visit[str(event.data["visit"])]
            turn.calls.append(_call(event, store, readable))
    shown = [turn for turn in turns if turn.calls or turn.node in {t.node for t in turns if t.calls}]
    return shown[:MAX_TURNS_SHOWN]


def _call(event: AuditEvent, store: ArtifactStore, readable: bool) -> ToolCallShown:
    tool = str(event.data.get("tool", ""))
    if event.type == "TOOL_REFUSED":
        return ToolCallShown(tool, refused=True, result="refused: the tool or its arguments are not allowed")
    record = _read(store, event.artifact_uris[0]) if readable and event.artifact_uris else None
    if record is None:
        error = event.data.get("error")
        return ToolCallShown(tool, result=f"error: {error}" if error else "(sealed)")
    result = f"error: {record['error']}" if record.get("error") else _shown(record.get("output"))
    return ToolCallShown(tool, _shown(record.get("arguments")), result)


def _read(store: ArtifactStore, uri: str) -> dict[str, Any] | None:
    try:
        found = store.read_json(uri)
    except (ArtifactMissing, ArtifactErased, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + " …"
