"""One definition or one request must not wedge a worker: the cases an outside prober found."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from dsmo.activities.artifacts import run_input_key
from dsmo.activities.audit_log import audit_key
from dsmo.activities.definition_store import DefinitionStore
from dsmo.activities.plugin_errors import UnknownAgent
from dsmo.client.client_errors import RunAlreadyExists
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import ExecutionRequest
from dsmo.workflows.definition.model import parse_definition
from dsmo.workflows.definition.sensitive import fingerprint
from tests.conftest import Harness

pytestmark = pytest.mark.integration

PAIRS = "L.exists(a, L.exists(b, a + b == -1))"  # depth 2: publishable; its cost is the data's


def costly_definition() -> object:
    return parse_definition(
        {
            "agent": "costly-condition",
            "inputs": ["L"],
            "start": "check",
            "failSafe": "review",
            "nodes": {
                "check": {
                    "actionType": "send_message",
                    "parameters": {"message": "checking"},
                    "transitions": [{"when": PAIRS, "to": "found"}, {"to": "done"}],
                },
                "found": {"actionType": "send_message", "parameters": {"message": "found"}},
                "done": {"actionType": "send_message", "parameters": {"message": "done"}},
                "review": {"actionType": "send_message", "parameters": {"message": "review"}},
            },
        }
    )


async def test_a_costly_condition_is_a_contract_violation_and_the_worker_keeps_serving(harness: Harness) -> None:
    definition = costly_definition()
    # 5,000 x 5,000 visits (~50 s of evaluation inside one workflow task) if it were evaluated.
    costly = await harness.start(definition, {"L": list(range(5_000))})  # type: ignore[arg-type]
    normal = [await harness.start(definition, {"L": [1, 2, 3]}) for _ in range(5)]  # type: ignore[arg-type]
    results = await asyncio.wait_for(asyncio.gather(*(harness.dsmo.result(r) for r in [costly, *normal])), 60)
    assert results[0].status is RunStatus.COMPLETED and results[0].path == ["check", "review"]
    assert all(r.status is RunStatus.COMPLETED and r.path == ["check", "done"] for r in results[1:])
    events = await harness.dsmo.events(costly)
    violation = next(e for e in events if e.type == "CONTRACT_VIOLATION")
    assert "was not evaluated" in violation.data["reason"] and "above the budget" in violation.data["reason"]
    assert violation.data["routedTo"] == "review"
    await harness.replay_all()


async def test_a_failed_start_leaves_nothing_a_later_start_picks_up(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    definition = parse_definition(
        {"agent": "atomic-start", "start": "profile", "nodes": {"profile": {"actionType": "run_agent",
         "agent": "candidate-profile"}}}
    )  # fmt: skip
    run_id = f"atomic-{uuid.uuid4().hex[:8]}"
    original = harness.dsmo.temporal.start_workflow

    async def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b"")

    monkeypatch.setattr(harness.dsmo.temporal, "start_workflow", unavailable)
    with pytest.raises(RPCError):  # the input was written, the run never started
        await harness.dsmo.start(
            definition, {"candidate": {"name": "old"}}, run_id=run_id, task_queue=harness.task_queue
        )
    monkeypatch.setattr(harness.dsmo.temporal, "start_workflow", original)
    await harness.start(definition, {"candidate": {"name": "new"}}, run_id=run_id)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.variables["candidate"] == {"name": "new"}
    assert result.variables["stages"]["profile"]["summary"]["firstName"] == "New"
    stored = harness.store.read_json(harness.store.uri(run_input_key(definition.workflow_version, run_id)))
    assert stored == {"candidate": {"name": "new"}}
    # The same id again, with yet another input, is refused: that run exists.
    with pytest.raises(RunAlreadyExists):
        await harness.start(definition, {"candidate": {"name": "third"}}, run_id=run_id)
    assert harness.store.read_json(harness.store.uri(run_input_key(definition.workflow_version, run_id))) == stored


@pytest.mark.parametrize("version", ["../definitions/x", "x\u0000", "abc.json?x=", "77b25a66b66a.json?x="])
async def test_a_version_that_is_a_path_never_reaches_the_store(harness: Harness, version: str) -> None:
    with pytest.raises(UnknownAgent, match="not a workflow_version"):
        DefinitionStore(harness.store).resolve("background-check", version)
    definition = parse_definition(
        {"agent": "pathy", "start": "child", "nodes": {"child": {"actionType": "trigger_agent",
         "parameters": {"agent": "background-check", "version": version}}}}
    )  # fmt: skip
    run_id = await harness.start(definition)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.FAILED and "not a workflow_version" in (result.error_message or "")


@pytest.mark.parametrize("bad_id", ["raw-run\n", "raw/../run", "raw run"])
async def test_a_raw_start_with_a_bad_run_id_fails_at_once_with_the_reason(harness: Harness, bad_id: str) -> None:
    """Started with the official client (as `temporal workflow start` would): no DSMO check ran."""
    definition = costly_definition()
    run_id = f"{bad_id}{uuid.uuid4().hex[:6]}"
    handle = await harness.dsmo.temporal.start_workflow(
        "AgentExecution",
        ExecutionRequest(definition=definition, input={"L": [1]}),
        id=run_id,
        task_queue=harness.task_queue,
    )
    harness.started.append(run_id)  # replayed on the current code after the test
    with pytest.raises(WorkflowFailureError) as failure:
        await asyncio.wait_for(handle.result(), 30)
    assert "run id" in str(failure.value.cause) and "use 1-200 letters" in str(failure.value.cause)
    history = await handle.fetch_history()
    scheduled = [e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    markers = [e for e in history.events if e.HasField("marker_recorded_event_attributes")]
    assert scheduled == [] and not any(
        m.marker_recorded_event_attributes.marker_name == "LocalActivity" for m in markers
    )


TWO_WAITS = {
    "agent": "two-waits",
    "start": "first",
    "nodes": {
        "first": {
            "actionType": "wait_for_response",
            "parameters": {"timeout": "1h"},
            "transitions": [{"to": "second"}],
        },
        "second": {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}},
    },
}


async def test_duplicate_events_in_a_loop_do_not_grow_the_history(harness: Harness) -> None:
    run_id = await harness.start(parse_definition(TWO_WAITS))
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    first = await harness.dsmo.respond(run_id, "yes", event_id="reply-1")
    assert first.accepted
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    handle = harness.dsmo.temporal.get_workflow_handle(run_id)
    before = len((await handle.fetch_history()).events)

    acks = [await harness.dsmo.respond(run_id, "yes", event_id="reply-1") for _ in range(60)]
    assert all(ack.duplicate and not ack.accepted and ack.status == "waiting" for ack in acks)
    grown = len((await handle.fetch_history()).events) - before
    # Ten duplicates are recorded (an accepted and a completed update each, in their own
    # workflow tasks); the other fifty leave no trace in the history.
    assert grown <= 10 * 5, grown
    duplicates = [e for e in await harness.dsmo.events(run_id) if e.type == "DUPLICATE_IGNORED"]
    assert len(duplicates) == 10
    # The run still takes its next event.
    assert (await harness.dsmo.respond(run_id, "second", event_id="reply-2")).accepted
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED


PRIVATE_REPLY = {
    "agent": "private-reply",
    "start": "wait",
    "sensitive": ["lastResponse"],
    "nodes": {
        "wait": {
            "actionType": "wait_for_response",
            "parameters": {"timeout": "1h"},
            "transitions": [{"when": "lastResponse.startsWith('sí')", "to": "yes"}, {"to": "no"}],
        },
        "yes": {"actionType": "send_message", "parameters": {"message": "ok"}},
        "no": {"actionType": "send_message", "parameters": {"message": "no"}},
    },
}


async def test_a_sensitive_variable_is_a_fingerprint_in_the_audit_trail(harness: Harness) -> None:
    secret = "sí, mi DNI es 12345678Z"
    run_id = await harness.start(parse_definition(PRIVATE_REPLY))
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await harness.dsmo.respond(run_id, secret, event_id="reply-1")
    result = await harness.dsmo.result(run_id)
    # The run used the real value; the trail has its fingerprint only.
    assert result.path == ["wait", "yes"] and result.variables["lastResponse"] == secret
    resumed = next(e for e in await harness.dsmo.events(run_id) if e.type == "RUN_RESUMED")
    assert resumed.data["set"] == {"lastResponse": fingerprint(secret)}
    exported = harness.store.s3.get_object(Bucket=harness.store.bucket, Key=audit_key(run_id))["Body"].read()
    assert secret.encode() not in exported and fingerprint(secret).encode() in exported
