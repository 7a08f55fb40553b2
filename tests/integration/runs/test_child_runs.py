"""Parent and child agents (the seed's "Wait for Agent") on the real server."""

from __future__ import annotations

from typing import Any

import pytest

from dsmo.activities.definition_store import DefinitionStore
from dsmo.client.client_errors import RunNotFound
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness

pytestmark = pytest.mark.integration

CHILD = {
    "agent": "child-waiter",
    "start": "ask",
    "nodes": {
        "ask": {"actionType": "send_message", "parameters": {"message": "hola {{who}}"}, "next": "wait"},
        "wait": {"actionType": "wait_for_response", "parameters": {"onTimeout": "fail"}, "next": "fail_maybe"},
        "fail_maybe": {"actionType": "send_message", "parameters": {"message": "{{lastResponse}} {{mustExist}}"}},
    },
}


def parent(child_input: dict[str, Any] | None = None, **params: Any) -> AgentDefinition:
    """A parent that triggers child-waiter; without ``mustExist`` in its input the child fails at its end."""
    child_input = {"who": "{{name}}", "mustExist": "x"} if child_input is None else child_input
    return parse_definition(
        {
            "agent": "parent",
            "start": "child",
            "nodes": {
                "child": {
                    "actionType": "trigger_agent",
                    "parameters": {"agent": "child-waiter", "input": child_input, **params},
                    "next": "after",
                },
                "after": {
                    "actionType": "send_message",
                    "parameters": {"message": "after {{childExecutionStatus | default('started')}}"},
                },
            },
        }
    )


@pytest.fixture
def published(harness: Harness) -> None:
    DefinitionStore(harness.store).publish(parse_definition(CHILD))


async def test_child_waiting_shows_parent_waiting_for_agent(harness: Harness, published: None) -> None:
    run_id = await harness.start(parent(), {"name": "Ana"})
    view = await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    assert view.waiting_for == "agent"
    child_id = view.waiting_data["childExecutionId"] if view.waiting_data else None
    assert child_id == f"{run_id}.child.1"
    child = await harness.dsmo.wait_for_status(child_id, {RunStatus.WAITING})
    assert child.waiting_for == "response"
    await harness.dsmo.respond(child_id, "listo")
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert result.variables["triggeredExecutionId"] == child_id
    assert result.variables["childExecutionStatus"] == "completed"
    assert result.variables["childExecutionSuccess"] is True
    assert result.variables["lastResponse"] == "listo" and result.variables["who"] == "Ana"
    assert harness.messages(run_id)[-1]["message"] == "after completed"
    # Started for this code, as its parent's code is: the child asks `workflow.patched` nothing.
    assert await harness.patch_markers(child_id) == [], "the child wrote patch markers"


async def test_cancelling_the_parent_cancels_the_child(harness: Harness, published: None) -> None:
    run_id = await harness.start(parent(), {"name": "Ana"})
    view = await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    child_id = str((view.waiting_data or {})["childExecutionId"])
    await harness.dsmo.wait_for_status(child_id, {RunStatus.WAITING})
    await harness.dsmo.cancel(run_id, reason="candidate withdrew", by="recruiter")
    result = await harness.dsmo.result(run_id)
    assert (result.status, result.cancelled_by, result.cancel_reason) == (
        RunStatus.CANCELLED,
        "recruiter",
        "candidate withdrew",
    )
    child = await harness.dsmo.result(child_id)
    assert child.status is RunStatus.CANCELLED


async def test_failed_child_fails_the_parent_or_not(harness: Harness, published: None) -> None:
    doomed = {"who": "{{name}}"}
    failing = await harness.start(parent(doomed), {"name": "A"})
    tolerant = await harness.start(parent(doomed, onChildFailure="continue"), {"name": "B"})
    for run_id in (failing, tolerant):
        await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        child_id = f"{run_id}.child.1"
        await harness.dsmo.wait_for_status(child_id, {RunStatus.WAITING})
        # The child's last node refers to a variable it was not given ("mustExist"): it fails.
        await harness.dsmo.respond(child_id, "ok")
    failed = await harness.dsmo.result(failing)
    assert failed.status is RunStatus.FAILED and failed.failed_action_id == "child"
    assert "ended failed" in (failed.error_message or "")
    went_on = await harness.dsmo.result(tolerant)
    assert went_on.status is RunStatus.COMPLETED
    assert went_on.variables["childExecutionSuccess"] is False
    assert went_on.variables["childExecutionStatus"] == "failed"


async def test_child_timeout_fails_parent_and_cancels_child(harness: Harness, published: None) -> None:
    run_id = await harness.start(parent(timeout="2s", onTimeout="fail"), {"name": "A"})
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.TIMEOUT
    child = await harness.dsmo.result(f"{run_id}.child.1")
    assert child.status is RunStatus.CANCELLED


async def test_fire_and_forget_child_outlives_the_parent(harness: Harness, published: None) -> None:
    run_id = await harness.start(parent(waitForCompletion=False), {"name": "Z"})
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    child_id = result.variables["triggeredExecutionId"]
    child = await harness.dsmo.wait_for_status(child_id, {RunStatus.WAITING})
    assert child.status is RunStatus.WAITING  # the parent ended; the child goes on


async def test_unpublished_child_agent_fails_clearly(harness: Harness) -> None:
    definition = parse_definition(
        {
            "agent": "p",
            "start": "c",
            "nodes": {"c": {"actionType": "trigger_agent", "parameters": {"agent": "nobody-x"}}},
        }
    )
    run_id = await harness.start(definition)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.FAILED
    assert "agent 'nobody-x' has no published definition" in (result.error_message or "")
    with pytest.raises(RunNotFound):
        await harness.dsmo.status(f"{run_id}.c.1")
