"""A run's age costs nothing: thousands of large events through continue-as-new.

A chat loop whose every event carries 60 KB used to die after ~70 events: each continue-as-new
input carried the whole trail with every event's variables, and passed Temporal's 2 MB limit.
Now the trail goes to the store in segments, large event variables by reference, and event
ids as a bounded window: every generation's input stays small whatever the run's age.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType

from dsmo.activities.audit_log import AuditActivities, audit_key, segment_key, verify_lines
from dsmo.activities.messaging import FileChannel
from dsmo.client.replay import resumed_values
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import WRITE_AUDIT_SEGMENT
from dsmo.workflows.contracts.trail_io import AuditSegment, TrailHead, canonical_values
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from dsmo.workflows.events.seen_ids import FINGERPRINT_CHARS, SEEN_IDS_WINDOW
from tests.conftest import Harness

pytestmark = pytest.mark.integration

# The figure; DSMO_LONG_RUN_EVENTS lowers it for a quick local try.
EVENTS = int(os.environ.get("DSMO_LONG_RUN_EVENTS", "5000"))
NOTES = "n" * (60 * 1024)
# Far under Temporal's 2 MB: the largest input any generation of the run may start with.
INPUT_BOUND = 512 * 1024


def chat_loop() -> AgentDefinition:
    return parse_definition(
        {
            "agent": "long-chat",
            "start": "listen",
            "nodes": {
                "listen": {
                    "actionType": "wait_for_event",
                    "parameters": {"event": "message", "timeout": "30d", "onTimeout": "fail"},
                    "transitions": [{"when": 'eventResult == "stop"', "to": "bye"}, {"to": "listen"}],
                },
                "bye": {"actionType": "send_message", "parameters": {"message": "bye"}},
            },
        }
    )


async def generation_inputs(harness: Harness, run_id: str) -> list[int]:
    """The size of each generation's start input (the checkpoint it carried), oldest first."""
    sizes = []
    async for execution in harness.dsmo.temporal.list_workflows(f"WorkflowId = '{run_id}'"):
        handle = harness.dsmo.temporal.get_workflow_handle(run_id, run_id=execution.run_id)
        async for event in handle.fetch_history_events(page_size=1):
            assert event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            sizes.append(sum(len(p.data) for p in payloads))
            break
    return sizes[::-1]


# 5,000 sequential updates take 2-3 minutes on two cores: a hang guard, not a speed target.
@pytest.mark.timeout(1200)
async def test_thousands_of_large_events_through_continue_as_new(harness: Harness) -> None:
    dsmo, store = harness.dsmo, harness.store
    run_id = await harness.start(chat_loop())
    for index in range(EVENTS):
        ack = await dsmo.deliver_event(
            run_id, "EVENT_COMPLETED", {"result": "said", "data": {"n": index, "notes": NOTES}}, event_id=f"m-{index}"
        )
        assert ack.accepted, (index, ack)

    # A duplicate of any id the run took, from any generation, is still recognised.
    for index in range(0, EVENTS, max(1, EVENTS // 25)):
        again = await dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "said"}, event_id=f"m-{index}")
        assert again.duplicate and not again.accepted, index
    await dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "stop"}, event_id="stop")
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED

    sizes = await generation_inputs(harness, run_id)
    assert len(sizes) > 3, f"the run never continued as new ({sizes})"
    assert max(sizes) < INPUT_BOUND, f"a generation started with {max(sizes)} bytes: {sizes}"
    # Only the event-id window grows, and only until it holds SEEN_IDS_WINDOW ids.
    assert max(sizes[-3:]) - max(sizes[1:4]) <= SEEN_IDS_WINDOW * FINGERPRINT_CHARS

    # One trail across every generation: contiguous, and the exported file verifies against it.
    trail = await dsmo.events(run_id, live=True)  # the run's own record: segments and the tail
    assert await dsmo.events(run_id, live=True) == trail  # again, from the client's cached segments
    assert [event.seq for event in trail] == list(range(1, len(trail) + 1))
    resumed = [event for event in trail if event.type == "RUN_RESUMED"]
    assert len(resumed) == EVENTS + 1
    assert [event.data["eventId"] for event in resumed[:3]] == ["m-0", "m-1", "m-2"]
    continued = [event for event in trail if event.type == "RUN_CONTINUED"]
    assert len(continued) == len(sizes) - 1
    body = store.read_bytes(store.uri(audit_key(run_id)))
    assert await dsmo.events(run_id) == trail  # read from that export now the run has ended
    expected = [event.model_dump(mode="json") for event in trail]
    check = verify_lines(body, expected, (await dsmo.trail(run_id)).head)
    assert check.ok, check.problem
    # The segments are in the store, write-once, and the export begins with them.
    first_segment = store.read_bytes(store.uri(segment_key(run_id, 1)))
    assert body.startswith(first_segment)

    # Large variables are kept by reference, and a replay can read them back.
    sample = resumed[EVENTS // 2]
    assert "set" not in sample.data and sample.data["setKeys"] == ["eventData", "eventResult"]
    values: dict[str, Any] = resumed_values(store, sample)
    assert values["eventData"] == {"n": EVENTS // 2, "notes": NOTES}
    assert sample.data["setRef"]["bytes"] == len(canonical_values(values))
    assert resumed[-1].data["set"] == {"eventResult": "stop", "eventData": {}}


async def test_an_event_that_arrives_while_the_run_hands_over_is_kept_for_the_next_generation(
    harness: Harness,
) -> None:
    dsmo = harness.dsmo
    writing, release = threading.Event(), threading.Event()
    audit = AuditActivities(harness.store)

    @activity.defn(name=WRITE_AUDIT_SEGMENT)
    def held_segment(segment: AuditSegment) -> TrailHead:
        writing.set()
        release.wait(120)  # a hang guard: the test releases it
        return audit.write_audit_segment(segment)

    queue = f"handover-{uuid.uuid4().hex[:8]}"
    worker = build_worker(
        dsmo.temporal,
        task_queue=queue,
        store=harness.store,
        channel=FileChannel(harness.outbox),
        overrides=[held_segment],
    )
    async with worker:
        run_id = (await dsmo.start(chat_loop(), task_queue=queue, history_limit=30)).run_id
        harness.started.append(run_id)
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        # Signals the wait refuses grow the history until the run continues as new inside its wait.
        for index in range(200):
            await dsmo.signal_event(run_id, "MESSAGE_RECEIVED", {"event_id": f"noise-{index}", "text": "x"})
            if await asyncio.to_thread(writing.wait, 0.2):
                break
        assert writing.is_set(), "the run never continued as new"
        # The segment is being written: the event is kept for the next generation, not lost.
        late = await dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "late"}, event_id="late")
        assert late.accepted and late.buffered, late
        release.set()
        await dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "stop"}, event_id="stop")
        result = await dsmo.result(run_id)
        trail = await dsmo.events(run_id)
    assert result.status is RunStatus.COMPLETED
    resumed = [event for event in trail if event.type == "RUN_RESUMED"]
    taken = [event for event in resumed if event.data.get("eventId") == "late"]
    assert len(taken) == 1 and taken[0].data["fromInbox"] and taken[0].data["set"]["eventResult"] == "late"
    assert resumed[-1].data["eventId"] == "stop"
