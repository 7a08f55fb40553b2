"""W1-W4 as DSMO definitions (B3), with the bench agent on every stage."""

from __future__ import annotations

import functools
from typing import Any

from dsmo.workflows.definition.model import AgentDefinition, parse_definition

STAGE = {
    "actionType": "run_agent",
    "agent": "bench-stage",
    "timeout": "1.5s",
    "retry": {"maxAttempts": 3, "initialInterval": "200ms", "backoffCoefficient": 2.0, "jitter": 0.2},
}


def _stage(**extra: Any) -> dict[str, Any]:
    return {**STAGE, **extra}


@functools.cache  # parsed once, as a client reuses its definitions; never mutated
def definition(workload: str) -> AgentDefinition:
    if workload in ("W1", "W4"):
        nodes = {
            "A": _stage(next="B"),
            "B": _stage(input="{{stages.A.outputUri}}", next="C"),
            "C": _stage(input="{{stages.B.outputUri}}"),
        }
    else:  # W2, W3: A -> (B or C) -> D; the orchestrator branches on A's summary
        nodes = {
            "A": _stage(transitions=[{"when": 'stages.A.summary.route == "b"', "to": "B"}, {"to": "C"}]),
            "B": _stage(input="{{stages.A.outputUri}}", next="D"),
            "C": _stage(input="{{stages.A.outputUri}}", next="D"),
            "D": _stage(input="{{stages.A.outputUri}}"),
        }
    return parse_definition({"agent": f"bench-{workload.lower()}", "start": "A", "nodes": nodes})


RESUMED_STAGE = "after"


@functools.cache
def resume_definition() -> AgentDefinition:
    """One wait, then one stage: resume latency is the event until that stage's agent starts."""
    return parse_definition(
        {
            "agent": "bench-resume",
            "start": "w",
            "nodes": {
                "w": {"actionType": "wait_for_response", "parameters": {"timeout": "7d"}, "next": RESUMED_STAGE},
                RESUMED_STAGE: _stage(),
            },
        }
    )


@functools.cache
def inbox_resume_definition() -> AgentDefinition:
    """A gate, then the wait of the resume test: its reply is already kept in the inbox when it begins."""
    return parse_definition(
        {
            "agent": "bench-inbox-resume",
            "start": "gate",
            "nodes": {
                "gate": {"actionType": "wait_for_event", "parameters": {"event": "go", "timeout": "7d"}, "next": "w"},
                "w": {"actionType": "wait_for_response", "parameters": {"timeout": "7d"}, "next": RESUMED_STAGE},
                RESUMED_STAGE: _stage(),
            },
        }
    )


def wait_definition() -> AgentDefinition:
    """One wait, for the scale test."""
    return parse_definition(
        {
            "agent": "bench-wait",
            "start": "w",
            "nodes": {"w": {"actionType": "wait_for_response", "parameters": {"timeout": "7d"}}},
        }
    )
