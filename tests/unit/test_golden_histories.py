"""Golden histories of the examples replay on the current workflow code (no server needed).

A failure here means a change would break runs in flight: guard it with `workflow.patched`
(see the README) instead of re-recording the history.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from dsmo.workflows.common.sandbox import sandbox_runner
from dsmo.workflows.engine.agent_execution import AgentExecution
from dsmo.workflows.flow.flow_workflows import FLOW_WORKFLOWS
from dsmo.workflows.lifecycle.retention_sweep import RetentionSweep
from dsmo.workflows.saga.compensation_retry import CompensationRetry

HISTORIES = sorted((Path(__file__).resolve().parents[1] / "histories").glob("*.json"))


def replayer() -> Replayer:
    return Replayer(
        workflows=[AgentExecution, *FLOW_WORKFLOWS, CompensationRetry, RetentionSweep],
        data_converter=pydantic_data_converter,
        workflow_runner=sandbox_runner(),
    )


def test_there_are_golden_histories() -> None:
    assert len(HISTORIES) >= 4


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_golden_history_replays(path: Path) -> None:
    document = json.loads(path.read_text())
    history = WorkflowHistory.from_json(document["workflowId"], document["history"])
    result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
