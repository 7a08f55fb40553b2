"""An action Temporal retried leaves a trace in the trail: which attempt succeeded, or how the
retries ended (each attempt's own failure stays in Temporal's history)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from dsmo.activities.actions import ActionContext, ActionRegistry, FunctionAction
from dsmo.client.definition_files import parse_definition_text
from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness

pytestmark = pytest.mark.integration

FLOW = """
agent: {agent}
start: charge
nodes:
  charge:
    actionType: invoke
    action: {action}
    input: {{amount: 10}}
    retry: {{maxAttempts: 3, initialInterval: 1s}}
"""


def _flaky(data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
    if ctx.attempt == 1:  # as if the worker had lost its connection mid-call
        raise ConnectionError("payment gateway went away")
    return {"charged": data["amount"], "attempt": ctx.attempt}


def _broken(data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
    raise ConnectionError(f"payment gateway down (attempt {ctx.attempt})")


@pytest.fixture
def actions() -> ActionRegistry:
    registry = ActionRegistry()
    registry.add(FunctionAction("flaky-charge", _flaky))
    registry.add(FunctionAction("broken-charge", _broken))
    return registry


async def _finished(harness: Harness, action: str) -> tuple[Any, dict[str, Any]]:
    agent = f"attempts-{uuid.uuid4().hex[:6]}"
    run_id = await harness.start(parse_definition_text(FLOW.format(agent=agent, action=action)))
    result = await harness.dsmo.result(run_id)
    ends = ("STAGE_SUCCEEDED", "STAGE_FAILED")
    [ended] = [event for event in await harness.dsmo.events(run_id) if event.stage == "charge" and event.type in ends]
    return result, {"type": ended.type, **ended.data}


async def test_an_action_that_succeeded_on_its_second_attempt_says_so(harness: Harness) -> None:
    result, charged = await _finished(harness, "flaky-charge")
    assert result.status == RunStatus.COMPLETED
    assert charged["type"] == "STAGE_SUCCEEDED" and charged["attempts"] == 2, charged
    await harness.replay_all()  # older histories (no attempt in the result) replay too: the golden tests


async def test_an_action_whose_retries_ran_out_says_how_many_and_why_they_stopped(harness: Harness) -> None:
    result, failed = await _finished(harness, "broken-charge")
    assert result.status == RunStatus.FAILED
    assert failed["type"] == "STAGE_FAILED", failed
    assert (failed["retryState"], failed["attempts"]) == ("MAXIMUM_ATTEMPTS_REACHED", 3), failed
    assert "attempt 3" in failed["error"]
