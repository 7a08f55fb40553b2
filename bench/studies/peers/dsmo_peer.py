"""DSMO: the W6 graph as a definition and two agents, loaded by the real worker as a plugin.

The runner is `python -m dsmo.worker --load bench.studies.peers.dsmo_peer`, the command a deployment
runs. DSMO reads each stage's input artifact and writes its output itself, so the agents get and
return documents; the store requests are those the other contenders' agents make.
"""

from __future__ import annotations

import functools
from typing import Any

import yaml

import dsmo
from bench.studies.peers.peer_work import PeerWork
from bench.studies.peers.runner_config import RunnerConfig
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.model import AgentDefinition, parse_definition


@functools.cache
def _work() -> PeerWork:
    return RunnerConfig.from_env().work(with_store=False)


# -- user code begins --
DEFINITION = """
agent: peer-w6
start: A
nodes:
  A: {actionType: run_agent, agent: peer-stage, timeout: 5s, next: B}
  B: {actionType: run_agent, agent: peer-stage, timeout: 5s, input: "{{stages.A.outputUri}}", next: C}
  C: {actionType: run_agent, agent: peer-stage, timeout: 5s, input: "{{stages.B.outputUri}}", next: reply}
  reply:
    actionType: wait_for_response
    parameters: {timeout: WAIT}
    transitions: [{when: "lastResponse == 'ok'", to: send}, {to: send_timeout}]
  send: {actionType: run_agent, agent: peer-send, timeout: 5s, input: "{{stages.C.outputUri}}"}
  send_timeout: {actionType: run_agent, agent: peer-send, timeout: 5s, input: "{{stages.C.outputUri}}"}
"""


@dsmo.agent("peer-stage")
def stage(document: Any, message: StageMessage) -> dsmo.ProcessorOutput:
    return dsmo.ProcessorOutput(document=_work().derive(message.run_id, message.stage, document))


@dsmo.agent("peer-send")
def send(document: Any, message: StageMessage) -> dsmo.ProcessorOutput:
    ended_by = "timeout" if message.stage == "send_timeout" else "reply"
    _work().effect(message.run_id, ended_by, key=message.idempotency_key)  # the same for every attempt
    return dsmo.ProcessorOutput(document={"sent": True})


# -- user code ends --


@functools.cache
def definition(wait_seconds: float, *, regular: bool = False) -> AgentDefinition:
    """The graph, its wait's timeout filled in (the driver starts runs with it).

    Args:
        wait_seconds: The reply wait's timeout.
        regular: Run every stage as a regular Temporal activity (``localStages: never``, the
            "dsmo-regular" contender); by default its 5 s stages run as local activities.
    """
    document = yaml.safe_load(DEFINITION.replace("WAIT", f"{int(wait_seconds)}s"))
    if regular:
        document = with_regular_stages(document)
    return parse_definition(document)


def with_regular_stages(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with ``localStages: never`` (a copy): every stage a regular activity."""
    return {**document, "localStages": "never"}
