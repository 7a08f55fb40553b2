"""Who prepares a run (input artifact, config snapshot): the DSMO starter, else the workflow.

A run started through `DsmoClient` is prepared before it starts and skips the workflow's local
activity; a run started any other way (the `temporal` CLI, a client that cannot reach the store)
is prepared by its workflow. Both leave the same artifacts and the same audit trail.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import ActivityEnvironment

from dsmo.activities.artifacts import ArtifactStore, StoredArtifact, run_input_key
from dsmo.activities.definition_store import config_key
from dsmo.activities.plugin_errors import ContractViolation
from dsmo.activities.preparation import RunPreparer
from dsmo.activities.processors import default_registry
from dsmo.activities.stage import StageActivities
from dsmo.client.client_errors import RunAlreadyExists
from dsmo.client.dsmo_client import DsmoClient
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import INLINE_INPUT_MAX_BYTES, PreparedRun, StageTask
from dsmo.workflows.contracts.run_records import ExecutionRequest
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness

pytestmark = pytest.mark.integration

STATUS = SearchAttributeKey.for_keyword("AgentExecutionStatus")


@pytest.fixture
def two_stages() -> AgentDefinition:
    return parse_definition(
        {
            "agent": "prepare-check",
            "start": "extract",
            "nodes": {
                "extract": {"actionType": "run_agent", "agent": "text-extract", "next": "classify"},
                "classify": {
                    "actionType": "run_agent",
                    "agent": "rule-classify",
                    "input": "{{stages.extract.outputUri}}",
                },
            },
        }
    )


async def _local_activities(harness: Harness, run_id: str) -> list[str]:
    history = await harness.dsmo.temporal.get_workflow_handle(run_id).fetch_history()
    names = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            details = event.marker_recorded_event_attributes.details
            if "data" in details:
                names.append(json.loads(details["data"].payloads[0].data)["activity_type"])
    return names


async def _status_upserts(harness: Harness, run_id: str) -> tuple[str | None, list[str]]:
    """The status the run was started with, and each value an upsert set it to later."""
    history = await harness.dsmo.temporal.get_workflow_handle(run_id).fetch_history()
    started, upserted = None, []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            fields = event.workflow_execution_started_event_attributes.search_attributes.indexed_fields
            started = json.loads(fields[STATUS.name].data)
        elif event.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
            upserted.append(json.loads(fields[STATUS.name].data))
    return started, upserted


async def _check_prepared(
    harness: Harness, definition: AgentDefinition, run_id: str, variables: dict[str, Any]
) -> None:
    store = harness.store
    version = definition.workflow_version
    stored_input = await asyncio.to_thread(store.read_json, store.uri(run_input_key(version, run_id)))
    assert stored_input == variables
    snapshot = await asyncio.to_thread(store.read_json, store.uri(config_key(version)))
    assert snapshot["workflowVersion"] == version and snapshot["definition"]["agent"] == definition.agent
    assert (await harness.dsmo.status(run_id)).config_ref == store.uri(config_key(version))
    described = await harness.dsmo.temporal.get_workflow_handle(run_id).describe()
    assert described.typed_search_attributes.get(STATUS) == "completed"


VARIABLES = {"document": {"text": "Invoice 40 EUR due 2026-12-01, billing@example.com"}}


async def test_a_dsmo_starter_prepares_the_run_itself(harness: Harness, two_stages: AgentDefinition) -> None:
    run_id = await harness.start(two_stages, VARIABLES)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.path == ["extract", "classify"]
    assert await _local_activities(harness, run_id) == ["export_audit"]  # no prepare_run
    # Started `running` (prepared, no delay, no rate limit): no upsert repeats it.
    assert await _status_upserts(harness, run_id) == ("running", ["completed"])
    await _check_prepared(harness, two_stages, run_id, VARIABLES)
    await harness.replay_all()


async def test_a_run_started_without_preparation_is_prepared_by_its_workflow(
    harness: Harness, two_stages: AgentDefinition
) -> None:
    # As the `temporal` CLI or any other Temporal client would start it: the bare request.
    plain = DsmoClient(harness.dsmo.temporal, harness.settings, prepare_runs=False)
    run_id = (await plain.start(two_stages, VARIABLES, task_queue=harness.task_queue)).run_id
    harness.started.append(run_id)
    assert (await plain.result(run_id)).status is RunStatus.COMPLETED
    assert await _local_activities(harness, run_id) == ["prepare_run", "export_audit"]
    # Started by a DSMO client (its request carries the generation), it merges its writes: the
    # name, version and `running` in one upsert, not a `pending` one before its preparation.
    assert await _status_upserts(harness, run_id) == ("pending", ["running", "completed"])
    await _check_prepared(harness, two_stages, run_id, VARIABLES)
    await harness.replay_all()


async def test_a_starter_that_cannot_reach_the_store_still_starts_the_run(
    harness: Harness, two_stages: AgentDefinition, caplog: pytest.LogCaptureFixture
) -> None:
    unreachable = harness.settings.with_changes(store={"endpoint": "http://127.0.0.1:9"})  # nothing listens
    client = DsmoClient(harness.dsmo.temporal, unreachable)
    run_id = (await client.start(two_stages, VARIABLES, task_queue=harness.task_queue)).run_id
    harness.started.append(run_id)
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED
    assert await _local_activities(harness, run_id) == ["prepare_run", "export_audit"]
    assert f"run {run_id}: preparing at start failed" in caplog.text
    # Not prepared at start: started `pending`, as its workflow may wait on the store.
    assert (await _status_upserts(harness, run_id))[0] == "pending"
    await _check_prepared(harness, two_stages, run_id, VARIABLES)


async def test_a_refused_start_leaves_the_existing_runs_input_alone(
    harness: Harness, two_stages: AgentDefinition
) -> None:
    run_id = await harness.start(two_stages, VARIABLES)
    await harness.dsmo.result(run_id)
    with pytest.raises(Exception, match="already exists"):
        await harness.dsmo.start(
            two_stages, {"document": {"text": "other"}}, run_id=run_id, task_queue=harness.task_queue
        )
    stored = await asyncio.to_thread(
        harness.store.read_json, harness.store.uri(run_input_key(two_stages.workflow_version, run_id))
    )
    assert stored == VARIABLES  # write-once: the refused start's input was not written over it


@pytest.mark.parametrize("kept", ["audit/{run}.jsonl", "audit/{run}/segments/000001.jsonl"])
async def test_an_id_whose_trail_the_store_keeps_is_refused(
    harness: Harness, two_stages: AgentDefinition, kept: str
) -> None:
    # What a run leaves once Temporal's retention has removed its history and the store still
    # keeps its trail (exported at its end, or the segments of a run that never exported one).
    run_id = f"kept-trail-{uuid.uuid4().hex[:8]}"
    key = kept.format(run=run_id)
    body = b'{"seq":1,"type":"RUN_STARTED"}\n'
    await asyncio.to_thread(harness.store.put_json_bytes_once, key, body, content_type="application/x-ndjson")
    with pytest.raises(RunAlreadyExists, match="keeps its audit trail"):
        await harness.dsmo.start(two_stages, VARIABLES, run_id=run_id, task_queue=harness.task_queue)
    with pytest.raises(RPCError, match="not found"):  # nothing started under the id
        await harness.dsmo.temporal.get_workflow_handle(run_id).describe()
    assert await asyncio.to_thread(harness.store.read_bytes, harness.store.uri(key)) == body
    missing = run_input_key(two_stages.workflow_version, run_id)
    assert not await asyncio.to_thread(harness.store.exists, missing)  # nothing half-written


def test_prepared_travels_on_the_wire_and_unknown_fields_are_refused(two_stages: AgentDefinition) -> None:
    # Extra fields are forbidden on the wire: an older worker fails the workflow task (and
    # Temporal retries it on a newer one) instead of running the request another way.
    prepared = ExecutionRequest(
        definition=two_stages, prepared=PreparedRun(input_uri="s3://b/artifacts/i.json", config_ref="s3://b/c.json")
    )
    body = json.loads(prepared.model_dump_json())
    assert body["prepared"] == {"inputUri": "s3://b/artifacts/i.json", "configRef": "s3://b/c.json"}
    assert ExecutionRequest.model_validate(body) == prepared
    body["unknownField"] = 1
    # What a worker that predates `prepared` sees: a field it does not know, refused.
    body["unknownField"] = body.pop("prepared")
    with pytest.raises(ValueError, match="unknownField"):
        ExecutionRequest.model_validate(body)


async def test_a_config_snapshot_that_contradicts_its_version_refuses_the_start(
    harness: Harness, two_stages: AgentDefinition
) -> None:
    # Someone wrote another definition under this version's snapshot key: the start is refused,
    # with the reason, and no run exists.
    other = two_stages.model_copy(update={"agent": "not-this-one"})
    version = other.workflow_version
    tampered = {"workflowVersion": version, "definition": {"agent": "tampered"}, "effective": {}}
    await asyncio.to_thread(harness.store.put_json_once, config_key(version), tampered)
    with pytest.raises(ContractViolation, match="holds another definition for this version"):
        await harness.dsmo.start(other, VARIABLES, run_id=f"tampered-{version}", task_queue=harness.task_queue)
    with pytest.raises(RPCError, match="not found"):
        await harness.dsmo.temporal.get_workflow_handle(f"tampered-{version}").describe()


class CountingConfigWrites(ArtifactStore):
    """The bucket's store, counting the conditional writes of config snapshots."""

    def __init__(self, store: ArtifactStore) -> None:
        super().__init__(lambda: store.s3, store.bucket, objects=store.objects)
        self.config_writes: list[str] = []
        self._count = threading.Lock()

    def put_json_bytes_once(self, key: str, body: bytes, **kwargs: Any) -> StoredArtifact:
        if key.startswith("configs/"):
            with self._count:
                self.config_writes.append(key)
        return super().put_json_bytes_once(key, body, **kwargs)


def test_a_burst_of_first_starts_of_a_version_writes_its_snapshot_once(
    store: ArtifactStore, two_stages: AgentDefinition
) -> None:
    # Sixteen starts of a version this process has not seen, at once: one writes the snapshot,
    # the others wait and take its reference. Racing on the key instead waited up to 2 s, since
    # the store queues conditional writes to one key behind a lock it retries once a second.
    counting = CountingConfigWrites(store)
    preparer = RunPreparer(counting)
    version = f"burst-{uuid.uuid4().hex[:8]}"
    definition = two_stages.model_dump(mode="json")
    with ThreadPoolExecutor(max_workers=16) as pool:
        prepared = list(
            pool.map(
                lambda n: preparer.prepare_run(
                    f"burst-{uuid.uuid4().hex}", version, {"n": n}, lambda: (definition, {})
                ),
                range(16),
            )
        )
    assert counting.config_writes == [config_key(version)]
    assert {p.config_ref for p in prepared} == {store.uri(config_key(version))}
    assert store.read_json(store.uri(config_key(version)))["definition"] == definition
    assert len({p.input_uri for p in prepared}) == 16


# -- the run input with its stages' tasks ---------------------------------------------------------


async def _task_inputs(harness: Harness, run_id: str) -> list[tuple[str, Any]]:
    """Each stage task the run scheduled, in order: (stage, the input document it carried)."""
    history = await harness.dsmo.temporal.get_workflow_handle(run_id).fetch_history()
    found = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            task = json.loads(event.activity_task_scheduled_event_attributes.input.payloads[0].data)
            found.append((task["stage"], task.get("inputDocument")))
    return found


async def test_a_small_run_input_travels_with_the_task_of_the_stage_that_reads_it(
    harness: Harness, two_stages: AgentDefinition
) -> None:
    run_id = await harness.start(two_stages, VARIABLES)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert result.variables["stages"]["extract"]["summary"] == {"wordCount": 6, "hasAmount": True, "emailCount": 1}
    # extract reads the run input: it came with the task; classify reads extract's output by reference.
    assert await _task_inputs(harness, run_id) == [("extract", VARIABLES), ("classify", None)]
    # The artifact is still the stage's input of record.
    started = [e for e in await harness.dsmo.events(run_id) if e.type == "STAGE_STARTED" and e.stage == "extract"]
    assert started[0].artifact_uris == [harness.store.uri(run_input_key(two_stages.workflow_version, run_id))]
    await harness.replay_all()


async def test_a_large_run_input_is_read_by_reference(harness: Harness, two_stages: AgentDefinition) -> None:
    large = {"document": {"text": "Invoice 40 EUR, billing@example.com " + "word " * INLINE_INPUT_MAX_BYTES}}
    run_id = await harness.start(two_stages, large)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert result.variables["stages"]["extract"]["summary"]["wordCount"] == 4 + INLINE_INPUT_MAX_BYTES
    assert await _task_inputs(harness, run_id) == [("extract", None), ("classify", None)]
    await harness.replay_all()


def _task(uri: str, document: dict[str, Any] | None) -> StageTask:
    run_id = f"inline-{uuid.uuid4().hex[:8]}"
    return StageTask(
        run_id=run_id,
        correlation_id=run_id,
        stage="extract",
        stage_path="extract",
        workflow_version="v-inline",
        agent="text-extract",
        artifact_in_uri=uri,
        idempotency_key=f"{run_id}:extract",
        created_at=datetime.now(UTC),
        input_document=document,
    )


async def test_a_stage_given_its_input_does_not_read_the_artifact(store: ArtifactStore) -> None:
    stages = StageActivities(store, default_registry)
    absent = store.uri(f"artifacts/v-inline/{uuid.uuid4().hex}/input.json")
    summary = await ActivityEnvironment().run(stages.run_stage, _task(absent, VARIABLES))
    assert summary.summary["hasAmount"] is True
    # The same task without the document reads the artifact, which is not there.
    with pytest.raises(ApplicationError, match="does not exist"):
        await ActivityEnvironment().run(stages.run_stage, _task(absent, None))


def test_a_stage_task_ignores_fields_a_later_version_adds() -> None:
    body = json.loads(_task("s3://b/artifacts/i.json", None).model_dump_json())
    body["someLaterHint"] = {"x": 1}
    assert StageTask.model_validate(body).input_document is None
