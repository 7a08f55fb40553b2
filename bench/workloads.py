"""W1-W4 as DSMO definitions (B3), with the bench agent on every stage."""

from __future__ import annotations

import functools
from typing import Any

from dsmo.workflows.definition.model import AgentDefinition, parse_definition

STAGE_BACKOFF_S = 0.2
STAGE_TIMEOUT_S = 1.5
STAGE = {
    "actionType": "run_agent",
    "agent": "bench-stage",
    "timeout": f"{STAGE_TIMEOUT_S}s",
    # Regular activities, as the floor's (raw Temporal) and the paper's orchestrator: Table 1's
    # lost completion is an activity completed asynchronously and never reported, which a local
    # activity cannot be. W6 measures DSMO's local stages (bench/studies/peers).
    "local": False,
    "retry": {
        "maxAttempts": 3,
        "initialInterval": f"{STAGE_BACKOFF_S * 1000:.0f}ms",
        "backoffCoefficient": 2.0,
        "jitter": 0.2,
    },
}


def _stage(**extra: Any) -> dict[str, Any]:
    return {**STAGE, **extra}


@functools.cache  # parsed once, as a client reuses its definitions; never mutated
def definition(workload: str) -> AgentDefinition:
    """``workload``'s definition, its stages pinned to regular activities (Table 1's, the floor's B3)."""
    return _definition(workload)


@functools.cache
def local_definition(workload: str) -> AgentDefinition:
    """``workload``'s definition with every stage a local activity: the floor comparison's `b3_local`.

    The same graph, agent and retries as `definition`'s; only where the attempts run differs.
    """
    return _definition(workload, local=True)


def _definition(workload: str, *, local: bool = False) -> AgentDefinition:
    if workload in ("W1", "W4"):
        nodes = _chain()
    else:  # W2, W3: A -> (B or C) -> D; the orchestrator branches on A's summary
        nodes = {
            "A": _stage(transitions=[{"when": 'stages.A.summary.route == "b"', "to": "B"}, {"to": "C"}]),
            "B": _stage(input="{{stages.A.outputUri}}", next="D"),
            "C": _stage(input="{{stages.A.outputUri}}", next="D"),
            # D reads the output of the branch that ran (only one of B and C did), as B1's D
            # reads its predecessor's: the lineage the shared rule reads from the artifacts.
            "D": _stage(input='{{stages.B.outputUri | default("")}}{{stages.C.outputUri | default("")}}'),
        }
    if local:
        nodes = {name: {**node, "local": True} for name, node in nodes.items()}
    return parse_definition({"agent": f"bench-{workload.lower()}", "start": "A", "nodes": nodes})


def _chain() -> dict[str, Any]:
    """W1's and W4's stages: A -> B -> C, each reading the one before."""
    return {
        "A": _stage(next="B"),
        "B": _stage(input="{{stages.A.outputUri}}", next="C"),
        "C": _stage(input="{{stages.B.outputUri}}"),
    }


FLOW_KEY = "customer"  # the input field the flow-control section's concurrency key reads


@functools.cache
def keyed_definition(limit: int = 1, *, stages: int = 3) -> AgentDefinition:
    """W4's definition (``stages=3``), or its first stage alone, with one concurrency key.

    At most ``limit`` runs per value of the input's `customer` are past PENDING; a start for a
    busy value waits in line (the section's throughput, ceiling and handover measures).
    """
    nodes = _chain() if stages == 3 else {"A": _stage()}
    return parse_definition(
        {
            "agent": f"bench-flow-{stages}",
            "start": "A",
            "nodes": nodes,
            "concurrency": [{"key": f"{{{{{FLOW_KEY}}}}}", "limit": limit}],
        }
    )


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
