"""One activation's work stays bounded whatever the inbox and the variables.

A wait's `match` was evaluated once per kept event, each time over every run variable: a full
inbox of 100 events with a 60 KB input of 20,000 empty lists took the workflow task past
Temporal's deadlock detector, and the run was wedged for good. Now a condition sees only the
roots it names, and the run's activation is built once for the whole inbox.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness
from tests.polling import until_value

pytestmark = pytest.mark.integration


def gated_chat() -> AgentDefinition:
    return parse_definition(
        {
            "agent": "gated-chat",
            "start": "gate",
            "inbox": {"maxEvents": 100},
            "nodes": {
                "gate": {"actionType": "wait_for_event", "parameters": {"event": "opened"}, "next": "reply"},
                "reply": {
                    "actionType": "wait_for_response",
                    "parameters": {"match": "event.data.text == 'go'"},
                    "next": "bye",
                },
                "bye": {"actionType": "send_message", "parameters": {"message": "bye"}},
            },
        }
    )


async def failed_tasks(harness: Harness, run_id: str) -> int:
    """The run's workflow tasks that failed, but for the deadlock detector's.

    What these tests prove is that the work is cut into bounded activations (a count, asserted by
    the timers each pause starts) and that the run is never wedged (it goes on and completes). The
    detector fails a task that runs for 2 s of wall clock, which an activation of a bounded count
    passes or not with the machine's load (three test workers share two cores): a measurement, not
    a test. A task failing for any other reason fails the test.
    """
    handle = harness.dsmo.temporal.get_workflow_handle(run_id)
    failed = EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    return sum(
        [
            1
            async for event in handle.fetch_history_events()
            if event.event_type == failed
            and "TMPRL1101" not in event.workflow_task_failed_event_attributes.failure.message
        ]
    )


@pytest.mark.parametrize(
    "run_input",
    [
        pytest.param({"lists": [[] for _ in range(20_000)]}, id="20k-empty-lists"),
        pytest.param({"values": list(range(99_000))}, id="99k-values"),
    ],
)
async def test_a_full_inbox_and_a_large_input_do_not_wedge_the_run(harness: Harness, run_input: dict[str, Any]) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(gated_chat(), run_input)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    for index in range(100):
        ack = await dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": f"early {index}"}, event_id=f"e-{index}")
        assert ack.buffered, (index, ack)
    # The gate opens: the reply wait judges all 100 kept events against its match at once.
    opened = await dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "opened"}, event_id="gate")
    assert opened.accepted
    view = await until_value(
        lambda: dsmo.wait_for_status(run_id, {RunStatus.WAITING}),
        lambda view: view.current_node == "reply",
        "the run waits at reply",
        seconds=120,
    )
    assert (
        view.current_node == "reply" and view.inbox is not None and view.inbox.count == 100
    )  # none matched; all still kept
    assert (await dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": "go"}, event_id="go")).accepted
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.variables["lastResponse"] == "go"
    assert await failed_tasks(harness, run_id) == 0


async def test_a_costly_match_over_a_full_inbox_is_judged_over_several_activations(harness: Harness) -> None:
    definition = gated_chat().model_dump(mode="json", by_alias=True, exclude_none=True)
    definition["nodes"]["reply"]["parameters"]["match"] = "big.exists(x, x == event.data.text)"
    definition["inputs"] = ["big"]
    dsmo = harness.dsmo
    run_id = await harness.start(parse_definition(definition), {"big": ["go"] * 32_000})
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    for index in range(1, 101):  # none matches: each costs 32,000 visits to judge
        assert (
            await dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": f"x{index}"}, event_id=f"e-{index}")
        ).buffered
    assert (await dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "opened"}, event_id="gate")).accepted
    handle = dsmo.temporal.get_workflow_handle(run_id)

    async def timers() -> int:
        started = EventType.EVENT_TYPE_TIMER_STARTED
        return sum([1 async for e in handle.fetch_history_events() if e.event_type == started])

    # 3.2 million visits in budgets of 500,000: the reply wait's timer, then a pause before each
    # of at least 6 more activations.
    await until_value(timers, lambda started: started >= 2 + 6, "the reply wait's timer and six pauses", seconds=120)
    view = await dsmo.status(run_id)
    assert view.current_node == "reply" and view.inbox is not None and view.inbox.count == 100
    assert (await dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": "go"}, event_id="go")).accepted
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.variables["lastResponse"] == "go"
    assert await failed_tasks(harness, run_id) == 0
