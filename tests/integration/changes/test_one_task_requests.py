"""Requests that reach a waiting run in one workflow task (sent while no worker runs it): each is
taken, and none is lost, whichever the task takes first."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness
from tests.integration.parked_runs import ParkedRuns

pytestmark = pytest.mark.integration

ANSWER_WITHIN = 60.0  # a hang guard for each answer and ending (never a timing assertion)


def asking(agent: str, version: str) -> AgentDefinition:
    nodes: dict[str, Any] = {
        "ask": {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "thank"},
        "thank": {"actionType": "send_message", "parameters": {"message": f"thanks from {version}"}},
    }
    return parse_definition({"agent": agent, "version": version, "start": "ask", "nodes": nodes})


@pytest.mark.parametrize("first", ["move", "reply"])
async def test_a_move_and_a_reply_in_one_task_are_both_taken(harness: Harness, first: str) -> None:
    dsmo = harness.dsmo
    agent = f"one-task-{uuid.uuid4().hex[:8]}"
    parked = ParkedRuns(harness, "one-task")
    run_id, first_execution = await parked.park_to_move(asking(agent, "1"), asking(agent, "2"))
    reply = {"event_id": "reply-1", "text": "yes"}
    if first == "reply":
        await dsmo.signal_event(run_id, "MESSAGE_RECEIVED", reply)
    move = await parked.held_move(run_id, asking(agent, "2"))
    if first == "move":
        await dsmo.signal_event(run_id, "MESSAGE_RECEIVED", reply)
    async with parked.worker():
        ack = await asyncio.wait_for(move, ANSWER_WITHIN)  # the move is made, whichever came first
        result = await asyncio.wait_for(dsmo.result(run_id), ANSWER_WITHIN)
    history = await dsmo.temporal.get_workflow_handle(run_id, run_id=first_execution).fetch_history()
    kinds = [event.event_type for event in history.events]
    replied = kinds.index(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    accepted = kinds.index(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    assert kinds[replied:accepted].count(EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED) == 1, "not one task"
    assert ack.to_version == "2" and result.status is RunStatus.COMPLETED, (ack, result)
    # The reply went with the run to version 2 and was taken there, once.
    said = [message["message"] for message in harness.messages(run_id) if message.get("message")]
    assert said == ["thanks from 2"], said
    kinds_in_trail = [event.type for event in await dsmo.events(run_id)]
    assert kinds_in_trail.count("RUN_RESUMED") == 1 and kinds_in_trail.count("RUN_MIGRATED") == 1, kinds_in_trail
