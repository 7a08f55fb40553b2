"""The seed's order saga on a real SQLite database: LIFO compensations, idempotent, shielded."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import ActivityEnvironment

from dsmo.activities.actions import ActionActivities, ActionRegistry
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import CompensationTask
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from dsmo_examples.orders.db import OrderDatabase, orders, reservations, shipments
from tests.conftest import Harness, definition_from
from tests.polling import until_value

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
BIN = Path(sys.executable).parent


def order(**changes: Any) -> dict[str, Any]:
    base = {
        "customer": "ana",
        "productId": "lamp",
        "quantity": 1,
        "amount": 49.5,
        "card": "4242 4242 4242 4242",
        "address": "Calle Mayor 1, Madrid",
    }
    return {"order": {**base, **changes}}


def saga() -> AgentDefinition:
    return definition_from(EXAMPLES / "order_saga.yaml")


def compensation_order(events: list[Any]) -> list[str]:
    return [e.stage for e in events if e.type == "COMPENSATION_STARTED"]


async def test_happy_path_commits_every_step(harness: Harness, order_db: OrderDatabase) -> None:
    run_id = await harness.start(saga(), order())
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.compensation is None
    assert order_db.row(orders, run_id)["status"] == "shipped"  # type: ignore[index]
    assert order_db.stock("lamp") == (9, 0)
    assert order_db.effects(run_id) == ["create_order", "reserve_stock", "capture_payment", "create_shipment"]


async def test_payment_fails_stock_released_and_order_cancelled(harness: Harness, order_db: OrderDatabase) -> None:
    run_id = await harness.start(saga(), order(card="4000 0000 0000 0002"))
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.FAILED and result.failed_action_id == "process_payment"
    assert result.compensation == {
        "status": "complete",
        "trigger": "failed",
        "compensated": ["reserve_stock", "create_order"],
        "failed": [],
    }
    events = await harness.dsmo.events(run_id)
    assert compensation_order(events) == ["reserve_stock", "create_order"]  # LIFO, never the failed step
    assert [e.type for e in events if e.type.startswith("COMPENSATION_")] == [
        "COMPENSATION_STARTED",
        "COMPENSATION_SUCCEEDED",
    ] * 2
    assert order_db.stock("lamp") == (10, 0)  # inventory back to its start values
    assert order_db.row(orders, run_id)["status"] == "cancelled"  # type: ignore[index]
    assert order_db.row(reservations, run_id)["status"] == "released"  # type: ignore[index]
    assert order_db.effects(run_id) == ["create_order", "reserve_stock", "release_stock", "cancel_order"]


async def test_shipment_fails_refund_release_cancel_in_that_order(harness: Harness, order_db: OrderDatabase) -> None:
    run_id = await harness.start(saga(), order(address="nowhere"))
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.FAILED and result.compensation is not None
    assert result.compensation["compensated"] == ["process_payment", "reserve_stock", "create_order"]
    assert order_db.effects(run_id)[-3:] == ["refund_payment", "release_stock", "cancel_order"]
    assert order_db.stock("lamp") == (10, 0)
    assert order_db.row(shipments, run_id) is None


async def test_a_second_execution_of_a_compensation_applies_nothing(
    harness: Harness, order_db: OrderDatabase, actions: ActionRegistry
) -> None:
    run_id = await harness.start(saga(), order(card="4000 0000 0000 0002"))
    await harness.dsmo.result(run_id)
    events = await harness.dsmo.events(run_id)
    started = next(e for e in events if e.type == "COMPENSATION_STARTED" and e.stage == "reserve_stock")
    output = (await harness.dsmo.variables(run_id))["steps"]["reserve_stock"]
    task = CompensationTask(
        run_id=run_id,
        node="reserve_stock",
        action="reserve-stock",
        kind="annulment",
        output={**output, "status": "active"},
        key=started.data["key"],
    )
    with ThreadPoolExecutor(max_workers=1) as threads:
        again = await ActivityEnvironment().run(ActionActivities(actions, threads).compensate_action, task)
    assert again.applied is False and again.detail == "already compensated"
    assert order_db.stock("lamp") == (10, 0)  # released once, not twice
    assert order_db.effects(run_id).count("release_stock") == 1


async def test_twenty_concurrent_sagas_never_oversell(harness: Harness, order_db: OrderDatabase) -> None:
    run_ids = await asyncio.gather(*(harness.start(saga(), order(customer=f"c{i}")) for i in range(20)))
    results = await asyncio.gather(*(harness.dsmo.result(run_id) for run_id in run_ids))
    shipped = [r for r in results if r.status is RunStatus.COMPLETED]
    refused = [r for r in results if r.status is RunStatus.FAILED]
    assert len(shipped) == 10 and len(refused) == 10
    assert all(
        r.failed_action_id == "reserve_stock"
        and r.compensation == {"status": "complete", "trigger": "failed", "compensated": ["create_order"], "failed": []}
        for r in refused
    )
    assert order_db.stock("lamp") == (0, 0)  # never below zero, nothing left reserved
    assert order_db.count(reservations, status="active") == 0
    assert order_db.count(orders, status="shipped") == 10 and order_db.count(orders, status="cancelled") == 10


def with_wait(**wait: Any) -> AgentDefinition:
    data = saga().model_dump(mode="json", by_alias=True, exclude_none=True)
    data["nodes"]["reserve_stock"]["next"] = "confirm"
    data["nodes"]["confirm"] = {
        "actionType": "wait_for_response",
        "parameters": {"timeout": "1h", **wait},
        "next": "process_payment",
    }
    return parse_definition(data)


async def test_cancellation_runs_compensations_to_the_end(harness: Harness, order_db: OrderDatabase) -> None:
    run_id = await harness.start(with_wait(), order())
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    assert order_db.stock("lamp") == (10, 1)
    await harness.dsmo.cancel(run_id, reason="customer changed their mind")
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.CANCELLED
    assert result.compensation is not None and result.compensation["compensated"] == ["reserve_stock", "create_order"]
    assert order_db.stock("lamp") == (10, 0)
    assert order_db.row(orders, run_id)["status"] == "cancelled"  # type: ignore[index]


async def test_timeout_unwinds_unless_the_definition_says_otherwise(harness: Harness, order_db: OrderDatabase) -> None:
    unwinding = await harness.start(with_wait(timeout="2s", onTimeout="fail"), order())
    keeping_definition = with_wait(timeout="2s", onTimeout="fail")
    data = keeping_definition.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["compensation"]["on"] = ["failed", "cancelled"]
    keeping = await harness.start(parse_definition(data), order(customer="bob"))
    first, second = await harness.dsmo.result(unwinding), await harness.dsmo.result(keeping)
    assert first.status is RunStatus.TIMEOUT and first.compensation is not None
    assert first.compensation["trigger"] == "timeout"
    assert second.status is RunStatus.TIMEOUT and second.compensation is None
    assert order_db.row(reservations, unwinding)["status"] == "released"  # type: ignore[index]
    assert order_db.row(reservations, keeping)["status"] == "active"  # type: ignore[index]


async def test_failed_compensation_listed_then_retried_by_hand(harness: Harness, order_db: OrderDatabase) -> None:
    data = saga().model_dump(mode="json", by_alias=True, exclude_none=True)
    data["compensation"] = {"maxRetries": 1, "initialInterval": "1s"}
    order_db.inject_fault("refund", 2)  # the gateway is down for the unwind and the one retry
    run_id = await harness.start(parse_definition(data), order(address="nowhere"))
    result = await harness.dsmo.result(run_id)
    assert result.compensation is not None and result.compensation["status"] == "partial"
    [failed] = result.compensation["failed"]
    retry_id = failed["retriedBy"]
    assert failed["node"] == "process_payment" and retry_id == f"comp-retry:{run_id}:process_payment"
    # The others were still compensated although the refund failed.
    assert result.compensation["compensated"] == ["reserve_stock", "create_order"]
    with pytest.raises(WorkflowFailureError) as ended:
        await harness.dsmo.temporal.get_workflow_handle(retry_id).result()
    assert "failed after 2 attempts" in str(ended.value.cause)

    # Listed from visibility, which catches up with the failure asynchronously.
    async def failed_compensations() -> dict[str, Any]:
        listed = await cli(harness, "compensations", "failed", "--json")
        return {row["id"]: row for row in json.loads(listed.stdout)}

    rows = await until_value(failed_compensations, lambda rows: retry_id in rows, f"{retry_id} listed as failed")
    assert rows[retry_id]["node"] == "process_payment" and rows[retry_id]["attempts"] == 2
    assert "gateway unavailable" in rows[retry_id]["last_error"]

    retried = await cli(harness, "compensations", "retry", retry_id)
    assert retried.returncode == 0 and "succeeded" in retried.stdout, retried.stdout + retried.stderr
    assert order_db.effects(run_id)[-1] == "refund_payment"
    assert order_db.stock("lamp") == (10, 0)
    # Undone now: it leaves the list, and is not retried again.
    await until_value(failed_compensations, lambda rows: retry_id not in rows, f"{retry_id} no longer listed")
    again = await cli(harness, "compensations", "retry", retry_id)
    assert again.returncode == 1 and "was undone already" in again.stderr, again.stdout + again.stderr
    assert order_db.effects(run_id).count("refund_payment") == 1


async def cli(harness: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [str(BIN / "dsmo"), *args], capture_output=True, text=True, env=harness.cli_env(), timeout=60
    )
