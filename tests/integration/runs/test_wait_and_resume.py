"""The first vertical slice end to end on the real stack: stage, wait, resume, message."""

from __future__ import annotations

import json

import pytest

from dsmo.client.client_errors import EventNotAccepted
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness

pytestmark = pytest.mark.integration

CANDIDATE = {"candidate": {"name": "  ana   maría lópez ", "phone": "+34 600-111-222", "skills": ["Python", "sql "]}}


async def test_run_waits_resumes_and_completes(harness: Harness, slice_definition: AgentDefinition) -> None:
    """Seed: PENDING -> RUNNING -> WAITING -> RUNNING (resume) -> COMPLETED."""
    dsmo, version = harness.dsmo, slice_definition.workflow_version
    run_id = await harness.start(slice_definition, CANDIDATE)

    # While waiting: the seed's WAITING structure, and the search attributes agree.
    waiting = await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    assert waiting.waiting_for == "response"
    assert waiting.current_node == "wait_reply"
    assert waiting.waiting_data == {"timeout": "24h", "attempt": 1, "expectedFrom": "postulant"}
    assert waiting.waiting_until is not None and waiting.updated_at is not None
    assert (waiting.waiting_until - waiting.updated_at).total_seconds() == 24 * 3600
    described = await dsmo.temporal.get_workflow_handle(run_id).describe()
    attrs = described.typed_search_attributes
    assert attrs.get(sa.AGENT_EXECUTION_STATUS) == "waiting"
    assert attrs.get(sa.WAITING_FOR) == "response"
    assert attrs.get(sa.AGENT_NAME) == "candidate-screening"
    assert attrs.get(sa.WORKFLOW_VERSION) == version
    assert attrs.get(sa.WAITING_UNTIL) is not None

    # The first message went out with the processor's summary in it.
    [ask] = harness.messages(run_id)
    assert ask["message"] == "Hola Ana, ¿sigues interesado en la posición?"
    assert ask["to"] == "+34 600-111-222"

    ack = await dsmo.respond(run_id, "Sí, claro", event_id="reply-1")
    assert ack.accepted and not ack.duplicate
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.result_type == "success"
    assert result.variables["lastResponse"] == "Sí, claro"

    final = await dsmo.status(run_id)
    assert final.status is RunStatus.COMPLETED and final.completed_at is not None and final.waiting_for is None
    attrs = (await dsmo.temporal.get_workflow_handle(run_id).describe()).typed_search_attributes
    assert attrs.get(sa.AGENT_EXECUTION_STATUS) == "completed"
    assert attrs.get(sa.WAITING_FOR) is None

    messages = harness.messages(run_id)
    assert [m["node"] for m in messages] == ["ask", "goodbye"]
    assert messages[1]["message"] == "Gracias Ana, recibimos: Sí, claro"

    # The stage's output artifact sits at the contract's key with the processor's content.
    key = f"artifacts/{version}/{run_id}/profile/attempt=1/output.json"
    output = json.loads(harness.store.read_bytes(harness.store.uri(key)))
    assert output["output"]["name"] == "Ana María López"
    assert output["output"]["skills"] == ["python", "sql"]
    assert output["summary"] == {"firstName": "Ana", "hasPhone": True, "skillCount": 2}
    assert harness.store.list_uris(f"artifacts/{version}/{run_id}/") == [
        harness.store.uri(f"artifacts/{version}/{run_id}/input.json"),
        harness.store.uri(key),
    ]
    stage = result.variables["stages"]["profile"]
    assert stage["outputUri"] == harness.store.uri(key) and stage["attempt"] == 1

    # The audit trail explains the run in order.
    events = await dsmo.events(run_id)
    assert [e.type for e in events] == [
        "RUN_CREATED",
        "STAGE_ENQUEUED",
        "STAGE_STARTED",
        "STAGE_SUCCEEDED",
        "ACTION_COMPLETED",
        "RUN_WAITING",
        "RUN_RESUMED",
        "ACTION_COMPLETED",
        "RUN_COMPLETED",
    ]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert all(e.run_id == run_id and e.workflow_version == version for e in events)
    succeeded = events[3]
    assert succeeded.stage == "profile" and succeeded.attempt == 1 and succeeded.artifact_uris == [stage["outputUri"]]
    assert events[6].data == {
        "eventType": "MESSAGE_RECEIVED",
        "eventId": "reply-1",
        "set": {"lastResponse": "Sí, claro"},
    }


async def test_events_are_validated_and_deduplicated(harness: Harness, slice_definition: AgentDefinition) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(slice_definition, CANDIDATE)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})

    # A bad payload through the update is rejected before anything is written.
    with pytest.raises(EventNotAccepted, match=r"MESSAGE_RECEIVED\.text: is required"):
        await dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"txt": "typo"})
    # DsmoClient refuses a bad signal before sending it...
    with pytest.raises(EventNotAccepted, match=r"MESSAGE_RECEIVED\.event_id: is required"):
        await dsmo.signal_event(run_id, "MESSAGE_RECEIVED", {"text": "no id"})
    # ...and one sent around it (a raw Temporal client) is recorded as rejected; the run keeps waiting.
    await dsmo.temporal.get_workflow_handle(run_id).signal("MESSAGE_RECEIVED", {"text": "no id"})
    # A good signal resumes it; the same id again (signal or update) is a recorded duplicate.
    await dsmo.signal_event(run_id, "MESSAGE_RECEIVED", {"event_id": "sig-1", "text": "vale"})
    await dsmo.signal_event(run_id, "MESSAGE_RECEIVED", {"event_id": "sig-1", "text": "vale"})
    result = await dsmo.result(run_id)
    assert result.variables["lastResponse"] == "vale"

    events = await dsmo.events(run_id)
    types = [e.type for e in events]
    assert types.count("RUN_RESUMED") == 1
    rejected = [e for e in events if e.type == "EVENT_REJECTED"]
    assert len(rejected) == 1 and "event_id: is required" in rejected[0].data["reason"]
    duplicates = [e for e in events if e.type == "DUPLICATE_IGNORED"]
    assert [d.data["eventId"] for d in duplicates] == ["sig-1"]
    assert len(harness.messages(run_id)) == 2


async def test_event_for_a_run_not_waiting_is_rejected(harness: Harness, slice_definition: AgentDefinition) -> None:
    dsmo = harness.dsmo
    data = slice_definition.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["nodes"]["goodbye"]["next"] = "second_wait"  # keep the run open after the first reply
    data["nodes"]["second_wait"] = {"actionType": "wait_for_response"}
    run_id = await harness.start(parse_definition(data), CANDIDATE)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.respond(run_id, "sí", event_id="first")
    # The same id again is an idempotent duplicate, not an error...
    again = await dsmo.respond(run_id, "sí", event_id="first")
    assert again.duplicate and not again.accepted
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.respond(run_id, "bye", event_id="closing")
    await dsmo.result(run_id)
    # ...a new one to an ended run is refused with a clear reason.
    with pytest.raises(Exception, match="has already ended"):
        await dsmo.respond(run_id, "otra", event_id="second")
