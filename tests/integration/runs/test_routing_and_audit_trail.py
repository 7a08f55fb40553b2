"""The DSMO paper's goals G1 and G2, each shown by a test that would fail if the goal were broken."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity

from dsmo.activities.audit_log import audit_key
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry, default_registry
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import RUN_STAGE, StageMessage, StageSummary, StageTask
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness, definition_from

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
BIN = Path(sys.executable).parent
INVOICE = "ACME Corp\nInvoice 2026-001 dated 2026-11-01\nTotal due: 1250.50 EUR\nbilling@acme.example"
COMPLAINT = "Hello, I want to file a complaint: the lamp arrived broken and I want a refund. ana@example.com thanks"
UNCLEAR = "Hello there, see you soon."


def rogue(document: Any, message: StageMessage) -> ProcessorOutput:
    # An agent that tries to steer the workflow: the orchestrator must ignore it.
    return ProcessorOutput(
        document={"next_stage": "evil", "route": "evil", "config_ref_seen": message.config_ref},
        summary={"next_stage": "evil", "category": "other"},
    )


@pytest.fixture
def registry() -> ProcessorRegistry:
    merged = ProcessorRegistry()
    for name in default_registry.names():
        processor = default_registry.get(name)
        merged.register(processor.name, processor.version)(processor.fn)
    merged.register("rogue-router", "1.0.0")(rogue)
    return merged


async def run_triage(harness: Harness, text: str) -> tuple[str, Any]:
    run_id = await harness.start(definition_from(EXAMPLES / "triage.yaml"), {"document": {"text": text}})
    return run_id, await harness.dsmo.result(run_id)


async def test_g1_the_orchestrator_alone_decides_the_branch(harness: Harness) -> None:
    """G1: the route follows the conditions over stage summaries, in declared order."""
    paths = {}
    for name, text in (("invoice", INVOICE), ("complaint", COMPLAINT), ("unclear", UNCLEAR)):
        run_id, result = await run_triage(harness, text)
        assert result.status is RunStatus.COMPLETED
        paths[name] = (await harness.dsmo.status(run_id)).path
        events = await harness.dsmo.events(run_id)
        assert any(e.type == "TRANSITION" and e.stage == "classify" for e in events)
    assert paths["invoice"] == ["extract", "classify", "enrich", "notify"]
    assert paths["complaint"] == ["extract", "classify", "validate", "notify"]
    assert paths["unclear"] == ["extract", "classify", "review"]


async def test_g1_an_agent_that_names_a_next_stage_has_no_effect(harness: Harness) -> None:
    definition = parse_definition(
        {
            "agent": "steered",
            "start": "work",
            "nodes": {
                "work": {
                    "actionType": "run_agent",
                    "agent": "rogue-router",
                    "transitions": [
                        {"when": 'stages.work.summary.category == "invoice"', "to": "evil"},
                        {"to": "done"},
                    ],
                },
                "evil": {"actionType": "send_message", "parameters": {"message": "the agent chose this"}},
                "done": {"actionType": "send_message", "parameters": {"message": "the orchestrator chose this"}},
            },
        }
    )
    run_id = await harness.start(definition)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert (await harness.dsmo.status(run_id)).path == ["work", "done"]
    assert [m["message"] for m in harness.messages(run_id)] == ["the orchestrator chose this"]


async def test_g1_runs_are_pinned_to_a_config_snapshot(harness: Harness) -> None:
    definition = definition_from(EXAMPLES / "triage.yaml")
    run_id, _ = await run_triage(harness, INVOICE)
    view = await harness.dsmo.status(run_id)
    assert view.config_ref == harness.store.uri(f"configs/{definition.workflow_version}.json")
    snapshot = harness.store.read_json(view.config_ref)
    assert snapshot["workflowVersion"] == definition.workflow_version
    assert snapshot["definition"] == definition.model_dump(mode="json", exclude_none=True)
    assert snapshot["effective"]["thresholds"] == {"minConfidence": 0.3}
    assert snapshot["effective"]["nodes"]["classify"]["retry"]["maxAttempts"] == 3
    assert snapshot["effective"]["nodes"]["classify"]["routes"] == ["review", "enrich", "validate"]


class ForeignVersionStage:
    """A worker of another deploy: it completes stages under a different workflow_version."""

    @activity.defn(name=RUN_STAGE)
    def run_stage(self, task: StageTask) -> StageSummary:
        now = datetime.now(UTC)
        return StageSummary(
            stage=task.stage,
            agent=task.agent,
            agent_version="9.9.9",
            attempt=task.attempt,
            artifact_out_uri="s3://elsewhere/x.json",
            output_sha256="0" * 64,
            output_bytes=2,
            summary={"category": "invoice"},
            workflow_version="000000000000",
            started_at=now,
            finished_at=now,
        )


async def test_g1_a_completion_from_another_version_is_never_applied(harness: Harness) -> None:
    queue = harness.task_queue + "-foreign"
    worker = build_worker(
        harness.dsmo.temporal,
        task_queue=queue,
        store=harness.store,
        channel=harness_channel(harness),
        overrides=[ForeignVersionStage().run_stage],
    )
    async with worker:
        run_id = (
            await harness.dsmo.start(
                definition_from(EXAMPLES / "triage.yaml"), {"document": {"text": INVOICE}}, task_queue=queue
            )
        ).run_id
        result = await harness.dsmo.result(run_id)
        events = await harness.dsmo.events(run_id)
        path = (await harness.dsmo.status(run_id)).path
    inconsistency = [e for e in events if e.type == "INCONSISTENCY"]
    assert inconsistency and inconsistency[0].data["got"] == "000000000000"
    assert "extract" not in result.variables["stages"]  # never applied
    assert path == ["extract", "review"]  # the fail-safe route
    violation = next(e for e in events if e.type == "CONTRACT_VIOLATION")
    assert violation.data["routedTo"] == "review"


def harness_channel(harness: Harness) -> Any:
    from dsmo.activities.messaging import FileChannel

    return FileChannel(harness.outbox)


async def test_g1_no_matching_route_goes_to_fail_safe_or_fails(harness: Harness) -> None:
    def graph(fail_safe: str | None) -> AgentDefinition:
        data: dict[str, Any] = {
            "agent": "routes",
            "start": "decide",
            "inputs": ["kind"],
            "nodes": {
                "decide": {
                    "actionType": "send_message",
                    "parameters": {"message": "x"},
                    "transitions": [{"when": 'kind == "a"', "to": "a"}, {"when": 'kind == "b"', "to": "b"}],
                },
                "a": {"actionType": "send_message", "parameters": {"message": "a"}},
                "b": {"actionType": "send_message", "parameters": {"message": "b"}},
            },
        }
        if fail_safe:
            data["failSafe"] = fail_safe
            data["nodes"][fail_safe] = {"actionType": "send_message", "parameters": {"message": "safe"}}
        return parse_definition(data)

    safe_run = await harness.start(graph("safe"), {"kind": "c"})
    assert (await harness.dsmo.result(safe_run)).status is RunStatus.COMPLETED
    assert (await harness.dsmo.status(safe_run)).path == ["decide", "safe"]
    failing = await harness.start(graph(None), {"kind": "c"})
    result = await harness.dsmo.result(failing)
    assert result.status is RunStatus.FAILED and "no transition of decide matched" in (result.error_message or "")
    assert [e.type for e in await harness.dsmo.events(failing)][-2:] == ["CONTRACT_VIOLATION", "RUN_ABORTED"]


async def dsmo_cli(harness: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [str(BIN / "dsmo"), *args], capture_output=True, text=True, env=harness.cli_env(), timeout=60
    )


async def test_g2_audit_trail_is_exported_chained_and_tamper_evident(harness: Harness) -> None:
    run_id, _ = await run_triage(harness, INVOICE)
    events = await harness.dsmo.events(run_id)
    for event in events:
        assert event.run_id == run_id and event.workflow_version and event.at
    stage_events = [e for e in events if e.type.startswith("STAGE_")]
    assert all(e.stage and e.attempt for e in stage_events if e.type != "STAGE_ENQUEUED")
    assert all(e.agent_version == "1.0.0" for e in stage_events if e.type == "STAGE_SUCCEEDED")
    assert all(e.artifact_uris for e in stage_events)

    key = audit_key(run_id)
    lines = harness.store.read_bytes(harness.store.uri(key)).decode().splitlines()
    assert len(lines) == len(events)
    assert json.loads(lines[1])["prevHash"] == json.loads(lines[0])["hash"]
    ok = await dsmo_cli(harness, "audit", "verify", run_id)
    assert ok.returncode == 0 and "hash chain intact and matches the run's trail" in ok.stdout

    # Tamper with one event (a different classification), keep the file otherwise intact.
    record = json.loads(lines[5])
    record["data"] = {**record.get("data", {}), "summary": {"category": "complaint"}}
    lines[5] = json.dumps(record)
    harness.store.s3.put_object(Bucket=harness.store.bucket, Key=key, Body=("\n".join(lines) + "\n").encode())
    bad = await dsmo_cli(harness, "audit", "verify", run_id)
    assert bad.returncode == 1 and "TAMPERED: line 6" in bad.stdout


async def test_g2_audit_levels(harness: Harness) -> None:
    base = {
        "agent": "levels",
        "start": "hi",
        "nodes": {"hi": {"actionType": "send_message", "parameters": {"message": "x"}}},
    }
    essential = await harness.start(parse_definition(base))
    extended = await harness.start(parse_definition({**base, "auditLevel": "extended"}))
    for run_id in (essential, extended):
        await harness.dsmo.result(run_id)
    assert "ACTION_COMPLETED" not in [e.type for e in await harness.dsmo.events(essential)]
    assert "ACTION_COMPLETED" in [e.type for e in await harness.dsmo.events(extended)]
