"""Exported archives on the real stack: what the trail vouches for, corrupt archives, and what
`dsmo status` and `dsmo audit verify` say of a run Temporal or retention no longer keeps."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest

from dsmo.activities.artifacts import run_input_key
from dsmo.activities.audit_log import audit_key
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.activities.retention_sweeping import RetentionActivities
from dsmo.client.definition_files import parse_definition_text
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.model import AgentDefinition
from tests.conftest import Harness
from tests.integration.lifecycle.test_subjects import dsmo_cli, history_gone
from tests.unit.test_run_archive import flipped_verdicts

pytestmark = pytest.mark.integration

FLOW = """
agent: {agent}
version: "1"
start: review
{extra}
nodes:
  review:
    actionType: run_agent
    agent: export-copy
    next: done
  done:
    actionType: send_message
    parameters: {{to: "someone@example.com", message: "thanks"}}
"""


def _copy(document: dict[str, Any], message: StageMessage) -> ProcessorOutput:
    return ProcessorOutput(document={"copied": document}, summary={"ok": True})


@pytest.fixture
def registry() -> ProcessorRegistry:
    registry = ProcessorRegistry()
    registry.register("export-copy", "1.0.0")(_copy)
    return registry


def flow(extra: str = "") -> AgentDefinition:
    return parse_definition_text(FLOW.format(agent=f"export-{uuid.uuid4().hex[:8]}", extra=extra))


async def completed(harness: Harness, definition: AgentDefinition, variables: dict[str, Any]) -> str:
    run_id = await harness.start(definition, variables)
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED
    return run_id


def forged(contents: dict[str, bytes], path: str, body: bytes) -> bytes:
    """The archive with ``path`` replaced and the manifest's sum for it rewritten to match."""
    manifest = json.loads(contents["manifest.json"])
    manifest["files"][path] = {"sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body)}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as written:
        for name, old in {**contents, path: body, "manifest.json": json.dumps(manifest).encode()}.items():
            written.writestr(name, old)
    return buffer.getvalue()


async def test_the_trail_vouches_for_the_input_history_and_definition_of_an_export(
    harness: Harness, tmp_path: Path
) -> None:
    definition = flow()
    variables = {"applicant": {"name": f"MARKER-{uuid.uuid4().hex[:8]}"}}
    run_id = await completed(harness, definition, variables)
    created = (await harness.dsmo.events(run_id))[0]
    stored_input = harness.store.read_bytes(harness.store.uri(run_input_key(definition.workflow_version, run_id)))
    assert created.data["inputSha256"] == hashlib.sha256(stored_input).hexdigest()
    archive = tmp_path / "run.zip"
    exported = await dsmo_cli(harness, "runs", "export", run_id, "-o", str(archive))
    assert exported.returncode == 0, exported.stderr
    verified = await dsmo_cli(harness, "audit", "verify", "--archive", str(archive))
    assert verified.returncode == 0 and verified.stdout.startswith("ok: 1 run(s)"), verified.stdout
    with zipfile.ZipFile(archive) as opened:
        contents = {name: opened.read(name) for name in opened.namelist()}
    input_path = f"runs/{run_id}/objects/artifacts/{definition.workflow_version}/{run_id}/input.json"
    snapshot_path = f"runs/{run_id}/definitions/{definition.workflow_version}.json"
    history_path = f"runs/{run_id}/history.json"
    snapshot = json.loads(contents[snapshot_path])
    snapshot["definition"]["nodes"]["done"]["parameters"]["message"] = "wire the money"
    tampered = {
        input_path: contents[input_path].replace(b"MARKER", b"SOMEONE"),
        history_path: _history_with_input(contents[history_path], {"applicant": {"name": "SOMEONE"}}),
        snapshot_path: json.dumps(snapshot).encode(),
    }
    expected = {
        input_path: "differs from the input the trail recorded",
        history_path: "its start request's input differs from the input the trail recorded",
        snapshot_path: f"its definition does not hash to version {definition.workflow_version}",
    }
    for path, body in tampered.items():
        target = tmp_path / "tampered.zip"
        target.write_bytes(forged(contents, path, body))
        refused = await dsmo_cli(harness, "audit", "verify", "--archive", str(target))
        assert refused.returncode == 1, refused.stdout
        assert refused.stdout.startswith(f"TAMPERED: {path}: {expected[path]}"), refused.stdout
    # A byte flipped anywhere in the real archive: a verdict every time, never `ok` with changed content.
    data = archive.read_bytes()
    assert flipped_verdicts(data, every=max(1, len(data) // 600)) >= 500


def _history_with_input(body: bytes, new_input: dict[str, Any]) -> bytes:
    history = json.loads(body)
    payload = history["events"][0]["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]
    request = json.loads(base64.b64decode(payload["data"]))
    request["input"] = new_input
    payload["data"] = base64.b64encode(json.dumps(request).encode()).decode()
    return json.dumps(history).encode()


async def test_status_of_a_run_temporal_no_longer_has_is_read_from_its_trail(harness: Harness) -> None:
    run_id = await completed(harness, flow(), {"note": "x"})
    temporal = harness.dsmo.temporal
    execution = WorkflowExecution(workflow_id=run_id)
    request = DeleteWorkflowExecutionRequest(namespace=temporal.namespace, workflow_execution=execution)
    await temporal.workflow_service.delete_workflow_execution(request)  # as retention does
    await history_gone(harness, run_id)
    shown = await dsmo_cli(harness, "status", run_id)
    assert shown.returncode == 0, shown.stderr
    lines = dict(line.split(None, 1) for line in shown.stdout.splitlines() if line.strip())
    assert lines["status"].strip() == "completed"
    assert lines["problem"].strip() == (
        "Temporal no longer has this run (past its retention); shown from its exported audit trail"
    )
    missing = await dsmo_cli(harness, "status", f"nobody-{uuid.uuid4().hex[:12]}")
    assert missing.returncode != 0 and "not found" in missing.stderr

    # With nothing to compare it with, a trail cut short before its ending still fails the check.
    assert (await dsmo_cli(harness, "audit", "verify", run_id)).returncode == 0
    store, key = harness.store, audit_key(run_id)
    exported = store.s3.get_object(Bucket=store.bucket, Key=key)["Body"].read().decode().splitlines()
    store.s3.put_object(Bucket=store.bucket, Key=key, Body=("\n".join(exported[:-1]) + "\n").encode())
    cut = await dsmo_cli(harness, "audit", "verify", run_id)
    assert cut.returncode == 1 and "TAMPERED: the trail ends before the run's ending" in cut.stdout, cut.stdout


async def test_audit_verify_says_retention_removed_the_trail(harness: Harness) -> None:
    definition = flow(extra="retention: {trail: 1h}")
    run_id = await completed(harness, definition, {"note": "x"})
    verified = await dsmo_cli(harness, "audit", "verify", run_id)
    assert verified.returncode == 0 and verified.stdout.startswith("ok: 5 events,"), verified.stdout
    markers = [uri for uri in harness.store.list_uris("retention/trails/") if uri.endswith(f"/{run_id}.json")]
    assert len(markers) == 1
    sweep_id = f"test-{uuid.uuid4().hex[:6]}"
    # Only this run's marker: a sweep of the shared bucket would take other tests' runs too.
    retention = RetentionActivities(harness.store, harness.dsmo.temporal)
    retention._remove_trail(harness.store.key_of(markers[0])[1], sweep_id)
    gone = await dsmo_cli(harness, "audit", "verify", run_id)
    assert gone.returncode == 1
    assert f"no exported audit trail for '{run_id}' (removed by retention, in sweep {sweep_id})" in gone.stderr
    assert "written when the run ends" not in gone.stderr
