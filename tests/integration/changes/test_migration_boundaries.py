"""Where a run moves when it is not waiting: at its next node boundary, never inside a stage; and a
move racing an event, where exactly one version takes the event."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.client.client_errors import MigrationNotAccepted, RunClosed
from dsmo.client.definition_files import parse_definition_text
from dsmo.client.dsmo_client import DsmoClient
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.model import AgentDefinition
from tests.conftest import Harness
from tests.polling import until

pytestmark = pytest.mark.asyncio

GATED = ProcessorRegistry()
# The stage runs until the test lets it go, after the move was asked for.
RELEASE = threading.Event()


@GATED.register("gated-stage", "1.0.0")
def _gated_stage(document: object, message: StageMessage) -> ProcessorOutput:
    RELEASE.wait(120)  # a hang guard only
    return ProcessorOutput(document={"checked": True}, summary={"checked": True})


@pytest.fixture
def registry() -> ProcessorRegistry:
    return GATED


FLOW = """
agent: {agent}
version: "{version}"
start: work
nodes:
  work:
    actionType: run_agent
    agent: gated-stage
    next: {ask}
  {ask}:
    actionType: wait_for_response
    parameters: {{timeout: 1h, onTimeout: fail}}
    next: bye
  bye:
    actionType: send_message
    parameters: {{message: "{message}"}}
"""


async def _publish(
    dsmo: DsmoClient, agent: str, version: str, *, ask: str = "ask", message: str = "bye"
) -> AgentDefinition:
    definition = parse_definition_text(FLOW.format(agent=agent, version=version, ask=ask, message=message))
    await dsmo.publish(definition)
    return definition


async def _inside_stage(harness: Harness, v1: AgentDefinition) -> str:
    run_id = await harness.start(v1)

    async def at_work() -> bool:
        view = await harness.dsmo.status(run_id)
        return view.status is RunStatus.RUNNING and view.current_node == "work"

    await until(at_work, "the run inside its stage", pause=0.05)
    return run_id


async def _update_accepted(dsmo: DsmoClient, run_id: str) -> None:
    async def accepted() -> bool:
        history = await dsmo.temporal.get_workflow_handle(run_id).fetch_history()
        return any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED for e in history.events)

    await until(accepted, "the migrate update accepted", pause=0.05)


async def test_a_run_inside_a_stage_moves_at_its_next_node_boundary(harness: Harness) -> None:
    dsmo, agent = harness.dsmo, f"boundary-{uuid.uuid4().hex[:8]}"
    v1 = await _publish(dsmo, agent, "1")
    v2 = await _publish(dsmo, agent, "2", message="bye from version 2")
    RELEASE.clear()
    try:
        run_id = await _inside_stage(harness, v1)
        move = asyncio.create_task(dsmo.migrate_run(run_id, v2, reason="new farewell"))
        await _update_accepted(dsmo, run_id)
        assert not move.done()  # the update waits for the boundary while the stage is in flight
    finally:
        RELEASE.set()
    ack = await move
    # Decided at the boundary after `work`, against the node the run reached there.
    assert (ack.from_node, ack.to_node, ack.waiting) == ("ask", "ask", False)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.respond(run_id, "ok")
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    events = await dsmo.events(run_id)
    types = [event.type for event in events]
    assert types.count("STAGE_STARTED") == 1  # the stage ran once, on version 1
    assert types.index("STAGE_SUCCEEDED") < types.index("RUN_MIGRATED") < types.index("RUN_WAITING")
    assert [e.workflow_version for e in events if e.type == "STAGE_SUCCEEDED"] == [v1.workflow_version]
    assert [m["message"] for m in harness.messages(run_id)][-1] == "bye from version 2"


async def test_a_boundary_that_cannot_move_refuses_and_the_run_goes_on_on_its_version(harness: Harness) -> None:
    dsmo, agent = harness.dsmo, f"boundary-{uuid.uuid4().hex[:8]}"
    v1 = await _publish(dsmo, agent, "1")
    v2 = await _publish(dsmo, agent, "2", ask="question")  # `ask` renamed: no counterpart without a map
    RELEASE.clear()
    try:
        run_id = await _inside_stage(harness, v1)
        move = asyncio.create_task(dsmo.migrate_run(run_id, v2))
        await _update_accepted(dsmo, run_id)
    finally:
        RELEASE.set()
    with pytest.raises(MigrationNotAccepted, match="node: 'ask' has no counterpart in version 2"):
        await move
    view = await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    assert (view.workflow_version, view.current_node) == (v1.workflow_version, "ask")
    await dsmo.respond(run_id, "ok")
    assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED


async def test_a_move_racing_a_reply_lets_exactly_one_version_take_the_reply(harness: Harness) -> None:
    dsmo, agent = harness.dsmo, f"race-{uuid.uuid4().hex[:8]}"
    RELEASE.set()  # the stage does not hold these runs
    v1 = await _publish(dsmo, agent, "1")
    v2 = await _publish(dsmo, agent, "2", message="bye from version 2")
    runs = [await harness.start(v1) for _ in range(6)]
    for run_id in runs:
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    moved: dict[str, bool] = {}
    for index, run_id in enumerate(runs):
        move, reply = dsmo.migrate_run(run_id, v2), dsmo.respond(run_id, "yes", event_id=f"{run_id}-reply")
        if index == 0:
            # The move answered before the reply is sent: a waiting run always takes it.
            await move
            outcomes: Sequence[Any] = await asyncio.gather(reply, return_exceptions=True)
        else:
            # Both in flight at once, sent in either order: whichever the run takes first wins.
            calls = (move, reply) if index % 2 else (reply, move)
            outcomes = await asyncio.gather(*calls, return_exceptions=True)
        refused = [o for o in outcomes if isinstance(o, BaseException)]
        # A reply taken first sends the run on past its wait; it may end before a node boundary.
        # (or end before the move reaches it at all: then the move finds a closed run).
        ended = [o for o in refused if isinstance(o, RunClosed) or "ended before" in str(o)]
        assert ended == refused, refused
        moved[run_id] = not refused
    assert moved[runs[0]]
    for run_id in runs:
        result = await dsmo.result(run_id)
        assert result.status is RunStatus.COMPLETED and result.variables["lastResponse"] == "yes"
        events = await dsmo.events(run_id)
        reply_id = f"{run_id}-reply"
        # Taken once: applied to version 1's wait, or kept and taken by version 2's (EVENT_CONSUMED).
        took = [e for e in events if e.type == "RUN_RESUMED" and e.data.get("eventId") == reply_id]
        assert len(took) == 1, [(e.type, e.workflow_version) for e in events]
        assert [e.type for e in events].count("RUN_MIGRATED") == int(moved[run_id])
        assert not [e for e in events if e.type == "EVENT_REJECTED"]


async def test_a_run_queued_behind_the_concurrency_limit_moves_before_its_first_node(harness: Harness) -> None:
    dsmo, agent = harness.dsmo, f"queued-{uuid.uuid4().hex[:8]}"
    RELEASE.set()
    limited = FLOW.replace("start: work", "rateLimit: {{maxConcurrent: 1}}\nstart: work")
    v1 = parse_definition_text(limited.format(agent=agent, version="1", ask="ask", message="bye"))
    v2 = parse_definition_text(limited.format(agent=agent, version="2", ask="ask", message="bye from version 2"))
    for definition in (v1, v2):
        await dsmo.publish(definition)
    first = await harness.start(v1)
    await dsmo.wait_for_status(first, {RunStatus.WAITING})
    queued = await harness.start(v1)
    await dsmo.wait_for_status(queued, {RunStatus.PENDING})
    move = asyncio.create_task(dsmo.migrate_run(queued, v2))
    await _update_accepted(dsmo, queued)
    assert not move.done()  # it moves once it has a slot, before its first node
    await dsmo.respond(first, "done")  # the first run ends and gives its slot to the queued one
    ack = await move
    assert (ack.from_node, ack.to_node, ack.waiting) == ("work", "work", False)
    await dsmo.wait_for_status(queued, {RunStatus.WAITING})
    await dsmo.respond(queued, "ok")
    assert (await dsmo.result(queued)).status is RunStatus.COMPLETED
    types = [e.type for e in await dsmo.events(queued)]
    assert types.index("RUN_MIGRATED") < types.index("STAGE_STARTED")
    assert [m["message"] for m in harness.messages(queued)][-1] == "bye from version 2"
