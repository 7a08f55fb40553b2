"""`dsmo replay` of a completed run of every example definition: every node kind replays to the
same state path (delay, each wait kind, children, a timeout path, a saga that compensated)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsmo.activities.definition_store import DefinitionStore
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition
from dsmo_examples.orders.db import OrderDatabase, orders
from tests.conftest import Harness, definition_from

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CANDIDATE = {"candidate": {"id": "c-7", "name": "Lucía", "phone": "+34 600", "email": "lucia@example.com"}}
INVOICE = "ACME Corp\nInvoice 2026-001\nTotal due: 1250.50 EUR\nbilling@acme.example"


async def dsmo_replay(harness: Harness, run_id: str) -> dict[str, Any]:
    proc = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), "replay", run_id, "--json"],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


async def wait_kind(harness: Harness, run_id: str, kind: str) -> None:
    deadline = asyncio.get_running_loop().time() + 120  # a hang guard only
    while asyncio.get_running_loop().time() < deadline:
        view = await harness.dsmo.status(run_id)
        if view.status is RunStatus.WAITING and view.waiting_for == kind:
            return
        assert not view.status.terminal, view
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_id} never waited for {kind}")


async def assert_replays(harness: Harness, run_id: str, status: RunStatus, path: list[str]) -> str:
    result = await harness.dsmo.result(run_id)
    assert (result.status, result.path) == (status, path)
    report = await dsmo_replay(harness, run_id)
    assert report["samePath"] is True, report
    assert report["replay_path"] == path and report["replay_status"] == status.value
    harness.started.append(report["replay"])
    return str(report["replay"])


def short_timeouts(definition: AgentDefinition) -> AgentDefinition:
    """candidate_screening with a 1 s reply timeout, so its timeout path runs in the test."""
    raw = definition.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw["nodes"]["wait_reply"]["parameters"]["timeout"] = "1s"
    return AgentDefinition.model_validate(raw)


async def test_every_example_replays_to_the_same_path(harness: Harness, order_db: OrderDatabase) -> None:
    definitions = DefinitionStore(harness.store)
    definitions.publish(definition_from(EXAMPLES / "background_check.yaml"))
    definitions.publish(definition_from(EXAMPLES / "welcome_pack.yaml"))

    # Every wait kind, a delay, a child waited for and one that is not, a stage.
    onboarding = await harness.start(definition_from(EXAMPLES / "onboarding.yaml"), CANDIDATE)
    await wait_kind(harness, onboarding, "response")
    await harness.dsmo.respond(onboarding, "sí")
    await wait_kind(harness, onboarding, "document")
    for name in ("id_card", "diploma"):
        await harness.dsmo.deliver_event(onboarding, "DOCUMENT_UPLOADED", {"document": name, "url": f"s3://d/{name}"})
    await wait_kind(harness, onboarding, "signature")
    await harness.dsmo.deliver_event(onboarding, "SIGNATURE_COMPLETED", {"signedDocumentUrl": "s3://d/signed.pdf"})
    await wait_kind(harness, onboarding, "test")
    await harness.dsmo.deliver_event(onboarding, "TEST_COMPLETED", {"score": 90, "result": "passed"})
    await wait_kind(harness, onboarding, "event")
    await harness.dsmo.deliver_event(onboarding, "EVENT_COMPLETED", {"result": "attended"})
    await wait_kind(harness, onboarding, "agent")
    child = f"{onboarding}.background.8"
    await harness.dsmo.wait_for_status(child, {RunStatus.WAITING})
    await harness.dsmo.respond(child, "limpio")

    # A delay first (the case that never finished replaying), a reply timeout taken, stages,
    # a saga that failed at the payment and compensated.
    welcome = await harness.start(definition_from(EXAMPLES / "welcome_pack.yaml"), CANDIDATE)
    timed_out = await harness.start(short_timeouts(definition_from(EXAMPLES / "candidate_screening.yaml")), CANDIDATE)
    triage = await harness.start(definition_from(EXAMPLES / "triage.yaml"), {"document": {"text": INVOICE}})
    order = {
        "customer": "ana",
        "productId": "lamp",
        "quantity": 1,
        "amount": 49.5,
        "card": "4000 0000 0000 0002",
        "address": "Calle Mayor 1",
    }
    saga = await harness.start(definition_from(EXAMPLES / "order_saga.yaml"), {"order": order})

    await assert_replays(
        harness,
        onboarding,
        RunStatus.COMPLETED,
        [
            "welcome",
            "ask",
            "documents",
            "contract",
            "assessment",
            "interview",
            "cooldown",
            "background",
            "profile",
            "welcome_pack",
            "goodbye",
        ],
    )
    await assert_replays(harness, child, RunStatus.COMPLETED, ["ask_provider", "wait_provider", "done"])
    await assert_replays(harness, welcome, RunStatus.COMPLETED, ["later", "send"])
    await assert_replays(harness, timed_out, RunStatus.COMPLETED, ["profile", "ask", "wait_reply", "goodbye"])
    timeout_events = await harness.dsmo.events(timed_out)
    assert [e.data["eventType"] for e in timeout_events if e.type == "RUN_RESUMED"] == ["TIMEOUT"]
    await assert_replays(harness, triage, RunStatus.COMPLETED, ["extract", "classify", "enrich", "notify"])
    stock_before = order_db.stock("lamp")
    saga_replay = await assert_replays(
        harness, saga, RunStatus.FAILED, ["create_order", "reserve_stock", "process_payment"]
    )
    saga_events = await harness.dsmo.events(saga)
    assert [e.stage for e in saga_events if e.type == "COMPENSATION_SUCCEEDED"] == ["reserve_stock", "create_order"]
    # The replay took each action's outcome from the record: no order, reservation, payment or
    # compensation of its own reached the database.
    replayed = await harness.dsmo.events(saga_replay)
    assert [(e.type, e.stage) for e in replayed if e.data.get("replayed") and "action" in e.data] == [
        ("STAGE_SUCCEEDED", "create_order"),
        ("STAGE_SUCCEEDED", "reserve_stock"),
        ("STAGE_FAILED", "process_payment"),
        ("COMPENSATION_SUCCEEDED", "reserve_stock"),
        ("COMPENSATION_SUCCEEDED", "create_order"),
    ]
    assert order_db.effects(saga_replay) == [] and order_db.row(orders, saga_replay) is None
    assert order_db.stock("lamp") == stock_before
    await harness.replay_all()
