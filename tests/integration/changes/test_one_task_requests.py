"""Requests that reach a waiting run in one workflow task (sent while no worker runs it): each is
taken, and none is lost, whichever the task takes first."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.migration_io import MIGRATE_UPDATE, MigrationAck, MigrationRequest
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness
from tests.integration.changes.test_hand_over_round_trip import admitted
from tests.integration.parked_runs import ParkedRuns
from tests.polling import until

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
    v1, v2 = asking(agent, "1"), asking(agent, "2")
    await dsmo.publish(v1)
    await dsmo.publish(v2)
    parked = ParkedRuns(harness, "one-task")
    run_id = await parked.park(v1)
    handle = dsmo.temporal.get_workflow_handle(run_id)
    first_execution = (await handle.describe()).run_id

    async def reply() -> None:
        await dsmo.signal_event(run_id, "MESSAGE_RECEIVED", {"event_id": "reply-1", "text": "yes"})

    move: asyncio.Task[Any] | None = None

    async def ask_move() -> None:
        nonlocal move
        request = MigrationRequest(definition=v2, reason="new wording")
        move = asyncio.create_task(handle.execute_update(MIGRATE_UPDATE, request, id="move", result_type=MigrationAck))
        await until(lambda: admitted(harness, run_id, "move"), "the move is held by the server")

    for ask in (ask_move, reply) if first == "move" else (reply, ask_move):
        await ask()
    async with parked.worker():
        assert move is not None
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
