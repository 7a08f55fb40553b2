"""Acceptance: one definition with every action type, driven through every WAITING kind by
the official `temporal workflow signal` CLI and by `dsmo`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dsmo.activities.definition_store import DefinitionStore
from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness, definition_from

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CANDIDATE = {"candidate": {"id": "c-42", "name": "Lucía", "phone": "+34 600", "email": "lucia@example.com"}}


async def run_cli(harness: Harness, program: str, *args: str) -> str:
    extra = []
    if program == "temporal":
        extra = ["--address", harness.settings.temporal.address, "--namespace", harness.settings.temporal.namespace]
    proc = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / program), *args, *extra],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc.stdout


async def signal(harness: Harness, run_id: str, name: str, payload: dict[str, object]) -> None:
    await run_cli(
        harness,
        "temporal",
        "workflow",
        "signal",
        "--workflow-id",
        run_id,
        "--name",
        name,
        "--input",
        json.dumps(payload),
    )


async def dsmo_event(harness: Harness, run_id: str, event_type: str, data: dict[str, object], *flags: str) -> str:
    return await run_cli(harness, "dsmo", "events", run_id, "--type", event_type, "--data", json.dumps(data), *flags)


async def waiting_for(harness: Harness, run_id: str, kind: str) -> dict[str, object]:
    deadline = asyncio.get_running_loop().time() + 120  # a hang guard only
    while asyncio.get_running_loop().time() < deadline:
        view = await harness.dsmo.status(run_id)
        if view.status is RunStatus.WAITING and view.waiting_for == kind:
            return view.waiting_data or {}
        assert not view.status.terminal, view
        await asyncio.sleep(0.1)
    raise AssertionError(f"{run_id} never waited for {kind}")


async def test_every_action_and_every_waiting_kind(harness: Harness) -> None:  # noqa: PLR0915 - one story
    definitions = DefinitionStore(harness.store)
    definitions.publish(definition_from(EXAMPLES / "background_check.yaml"))
    definitions.publish(definition_from(EXAMPLES / "welcome_pack.yaml"))
    run_id = await harness.start(definition_from(EXAMPLES / "onboarding.yaml"), CANDIDATE)

    data = await waiting_for(harness, run_id, "response")  # waitingFor: response
    assert data["expectedFrom"] == "candidate" and data["timeout"] == "24h"
    await signal(harness, run_id, "MESSAGE_RECEIVED", {"event_id": "reply-1", "text": "¡Sí!"})

    data = await waiting_for(harness, run_id, "document")  # waitingFor: document
    assert data["documents"] == ["id_card", "diploma"] and data["requestId"]
    out = await dsmo_event(harness, run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://docs/id.pdf"})
    assert "still waiting for: diploma" in out
    data = await waiting_for(harness, run_id, "document")  # a partial upload keeps it waiting
    assert data["received"] == ["id_card"]
    await signal(
        harness, run_id, "DOCUMENT_UPLOADED", {"event_id": "doc-2", "document": "diploma", "url": "s3://docs/d.pdf"}
    )

    data = await waiting_for(harness, run_id, "signature")  # waitingFor: signature
    assert data["document"] == "https://docs.example.com/contracts/c-42.pdf"
    await dsmo_event(
        harness,
        run_id,
        "SIGNATURE_COMPLETED",
        {"signedDocumentUrl": "s3://docs/signed.pdf", "signedAt": "2026-11-21T10:00:00Z"},
    )

    data = await waiting_for(harness, run_id, "test")  # waitingFor: test
    assert data["test"] == "python-basics" and data["timeout"] == "3d"
    await signal(harness, run_id, "TEST_COMPLETED", {"event_id": "test-1", "score": 87.5, "result": "passed"})

    data = await waiting_for(harness, run_id, "event")  # waitingFor: event
    assert data["event"] == "interview-c-42" and data["title"] == "Entrevista final"
    await dsmo_event(harness, run_id, "EVENT_COMPLETED", {"result": "attended", "data": {"room": "B"}}, "--signal")

    data = await waiting_for(harness, run_id, "delay")  # waitingFor: delay
    assert data["until"]

    data = await waiting_for(harness, run_id, "agent")  # waitingFor: agent
    child_id = str(data["childExecutionId"])
    assert child_id == f"{run_id}.background.8"
    await harness.dsmo.wait_for_status(child_id, {RunStatus.WAITING})
    await signal(harness, child_id, "MESSAGE_RECEIVED", {"event_id": "verifier-1", "text": "sin antecedentes"})

    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    variables = result.variables
    assert variables["documentUrls"] == ["s3://docs/id.pdf", "s3://docs/d.pdf"]
    assert variables["signedDocumentUrl"] == "s3://docs/signed.pdf" and variables["signedAt"] == "2026-11-21T10:00:00Z"
    assert (variables["testScore"], variables["testResult"]) == (87.5, "passed")
    assert variables["eventResult"] == "attended" and variables["eventData"] == {"room": "B"}
    assert variables["childExecutionStatus"] == "completed" and variables["childExecutionSuccess"] is True
    assert variables["lastResponse"] == "sin antecedentes"  # the child's variables come back to the parent
    assert variables["stages"]["profile"]["summary"]["firstName"] == "Lucía"

    events = await harness.dsmo.events(run_id)
    resumed = [e.data["eventType"] for e in events if e.type == "RUN_RESUMED"]
    assert resumed == [
        "MESSAGE_RECEIVED",
        "DOCUMENT_UPLOADED",
        "SIGNATURE_COMPLETED",
        "TEST_COMPLETED",
        "EVENT_COMPLETED",
        "SCHEDULE_REACHED",
        "AGENT_COMPLETED",
    ]
    assert [e.data["waitingFor"] for e in events if e.type == "RUN_WAITING"] == [
        "response",
        "document",
        "signature",
        "test",
        "event",
        "delay",
        "agent",
    ]
    assert [e.data["document"] for e in events if e.type == "EVENT_RECEIVED"] == ["id_card"]

    # Requests went out through the channel; the final message used every variable.
    sent = harness.messages(run_id)
    assert [m.get("kind") for m in sent] == ["message", "document", "signature", "test", "message"]
    assert sent[-1]["message"].startswith("Bienvenida Lucía: test passed (87.5)")

    # The fire-and-forget child outlives the parent and completes on its own.
    pack_id = str(variables["triggeredExecutionId"])
    assert pack_id == f"{run_id}.welcome_pack.10"
    pack = await harness.dsmo.result(pack_id)
    assert pack.status is RunStatus.COMPLETED
