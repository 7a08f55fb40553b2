"""Erasing a data subject leaves nothing of theirs readable: not in the trail, an export, the bucket,
a workflow history DSMO owns (the run's, its key lock's, its throttle bucket's), or the file outbox."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import uuid
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from dsmo.activities.actions import ActionContext, ActionRegistry, FunctionAction
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.activities.run_generations import generations
from dsmo.client.definition_files import parse_definition_text
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.history_deletion import history_served, until_gone
from dsmo.client.recorded_outputs import action_output
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.flow_control import shard_of, slots_of, throttle_id
from dsmo.workflows.saga.compensation_retry import retry_id
from tests.conftest import Harness
from tests.polling import until, until_value
from tests.rewind_flow import waiting_at

pytestmark = pytest.mark.integration

FLOW = """
agent: {agent}
version: "1"
inputs: [applicant]
subject: "{{{{applicant.id}}}}"
concurrency:
  - key: "{{{{applicant.id}}}}"
throttle: {{key: "{{{{applicant.id}}}}", limit: 10, period: 1m}}
compensation: {{maxRetries: 1, initialInterval: 1s}}
start: hold
nodes:
  hold:
    actionType: invoke
    action: erasure-hold
    input: {{for: "{{{{applicant.id}}}}", name: "{{{{applicant.name}}}}"}}
    compensate: {{kind: annulment}}
    next: greet
  greet:
    actionType: send_message
    parameters: {{to: "{{{{applicant.email}}}}", message: "Hola {{{{applicant.name}}}}"}}
    next: reply
  reply:
    actionType: wait_for_response
    parameters: {{timeout: 1h, onTimeout: fail, expectedFrom: "{{{{applicant.email}}}}"}}
    next: check
  check:
    actionType: run_agent
    agent: erasure-strict
"""


def _hold(data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
    return {"heldFor": data["for"], "name": data["name"]}


def _release(output: dict[str, Any], ctx: ActionContext) -> bool:
    # The release keeps failing: the unwind hands it to a durable retry (a helper workflow whose
    # task holds the step's output), which gives up after its one retry.
    raise ConnectionError("the hold service is down")


def _strict(document: dict[str, Any], message: StageMessage) -> ProcessorOutput:
    # The output schema wants an id that starts with X-: the subject's does not, a contract violation.
    return ProcessorOutput(document={"id": document["applicant"]["id"]}, summary={"ok": True})


@pytest.fixture
def actions() -> ActionRegistry:
    registry = ActionRegistry()
    registry.add(FunctionAction("erasure-hold", _hold, _release))
    return registry


@pytest.fixture
def registry() -> ProcessorRegistry:
    registry = ProcessorRegistry()
    schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^X-"}}, "required": ["id"]}
    registry.register("erasure-strict", "1.0.0", output_schema=schema)(_strict)
    return registry


def bucket_objects_holding(harness: Harness, needles: list[bytes]) -> list[str]:
    """Every object in the bucket, read with a plain S3 client: the keys of those holding a needle."""
    s3, bucket, found = harness.store.s3, harness.store.bucket, []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            if any(needle in body for needle in needles):
                found.append(item["Key"])
    return found


def readable(node: Any) -> list[bytes]:
    """A history's JSON, and every payload in it decoded: the JSON form keeps payloads in base64."""
    if isinstance(node, dict):
        found = [part for value in node.values() for part in readable(value)]
        data = node.get("data")
        if isinstance(data, str):
            with contextlib.suppress(binascii.Error, ValueError):
                found.append(base64.b64decode(data, validate=True))
        return found
    if isinstance(node, list):
        return [part for value in node for part in readable(value)]
    return [node.encode()] if isinstance(node, str) else []


async def history_json(harness: Harness, workflow_id: str) -> bytes | None:
    """Every execution's history of ``workflow_id``, payloads decoded (None: Temporal has none)."""
    texts: list[bytes] = []
    async for execution in harness.dsmo.temporal.list_workflows(f"WorkflowId = '{workflow_id}'"):
        handle = harness.dsmo.temporal.get_workflow_handle(workflow_id, run_id=execution.run_id)
        try:
            history = (await handle.fetch_history()).to_json()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            continue
        texts += [history.encode(), *readable(json.loads(history))]
    return b"\n".join(texts) if texts else None


async def listed(harness: Harness, workflow_id: str) -> bytes:
    """The histories of a workflow visibility lists a moment after it started."""
    found = await until_value(
        lambda: history_json(harness, workflow_id), lambda found: found is not None, f"{workflow_id}: a history found"
    )
    assert found is not None
    return found


async def test_an_erased_subject_s_values_are_nowhere_a_user_can_read(harness: Harness) -> None:
    definition = parse_definition_text(FLOW.format(agent=f"erasure-{uuid.uuid4().hex[:8]}"))
    tag = uuid.uuid4().hex[:12]
    person = {"id": f"K-{tag}", "email": f"ana.{tag}@example.com", "name": f"Ana-{tag}"}
    needles = [value.encode() for value in person.values()]
    run_id = await harness.start(definition, {"applicant": person})
    await waiting_at(harness, run_id, "reply")
    await harness.dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": "yes", "from": person["email"]})
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.FAILED and "id: does not match '^X-'" in (result.error_message or "")

    events = await harness.dsmo.events(run_id)
    kinds = {event.type for event in events}
    assert {"SLOT_TAKEN", "RUN_WAITING", "STAGE_SUCCEEDED", "STAGE_FAILED"} <= kinds
    # The action's output is kept sealed by reference, and reads back while the subject is not erased.
    held = next(e for e in events if e.type == "STAGE_SUCCEEDED" and e.stage == "hold")
    assert "output" not in held.data and action_output(harness.store, held) == {
        "heldFor": person["id"],
        "name": person["name"],
    }
    waiting = next(e for e in events if e.type == "RUN_WAITING" and e.stage == "reply")
    assert str(waiting.data["expectedFrom"]).startswith("hmac-sha256:")
    assert harness.messages(run_id)  # the file channel wrote the greeting

    # The flow-control workflows that served the run: its key's lock shard and its throttle's bucket.
    slot = slots_of(definition.agent, definition.concurrency or [], {"applicant": person}, harness.task_queue)[0]
    flow_control = [shard_of(slot.lock)[0], throttle_id(definition.agent, person["id"])]
    for workflow_id in flow_control:
        assert person["id"].encode() not in (await listed(harness, workflow_id))
    # The run's own history holds the values until the erasure (the search below would find them),
    # and so does the compensation's retry, once it has given up.
    assert person["id"].encode() in (await history_json(harness, run_id) or b"")
    retry = retry_id(run_id, "hold")

    async def given_up() -> bool:  # it gives up after one retry, a second later
        return (await harness.dsmo.temporal.get_workflow_handle(retry).describe()).close_time is not None

    await until(given_up, f"{retry} gives up")
    assert person["id"].encode() in (await history_json(harness, retry) or b"")

    erasing = DsmoClient(
        harness.dsmo.temporal,
        harness.settings.with_changes(messaging={"outbox_dir_override": str(harness.outbox)}),
    )
    # Every execution the erasure must delete, from Temporal's own records (not visibility's rows).
    temporal = harness.dsmo.temporal
    current = (await temporal.get_workflow_handle(run_id).describe()).run_id
    executions = [(run_id, each) for each in await generations(temporal, run_id, current)]
    executions.append((retry, (await temporal.get_workflow_handle(retry).describe()).run_id))
    assert all([await history_served(temporal, each) for each in executions])
    # What erasure reports as "deletion requested, still served" when Temporal keeps serving one.
    assert await until_gone(temporal, executions, limit=0) == executions
    report = await erasing.erase_subject(person["id"], reason="asked to be forgotten", by="dpo")
    assert report.histories_deleted >= 1 and report.histories_pending == [] and report.messages_removed == 1

    # Temporal serves no history of the run the moment the erasure returns: asked by execution,
    # so a row visibility dropped first cannot hide a history still served.
    assert [each for each in executions if await history_served(temporal, each)] == []
    assert await history_json(harness, run_id) is None
    assert await history_json(harness, retry) is None
    for workflow_id in flow_control:
        history = await history_json(harness, workflow_id) or b""
        assert not [needle for needle in needles if needle in history], workflow_id
    trail = json.dumps([event.model_dump(mode="json") for event in await harness.dsmo.events(run_id)])
    assert not [needle for needle in needles if needle in trail.encode()], trail
    exported = await harness.dsmo.export(run_id)
    assert not [needle for needle in needles if needle in exported.data]
    assert bucket_objects_holding(harness, needles) == []
    assert harness.messages(run_id) == []
    harness.started.remove(run_id)  # its history is gone: nothing to replay
