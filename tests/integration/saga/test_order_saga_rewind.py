"""The shipped order saga goes back to `create_order`: the undo cancels the order, releases,
refunds and voids, and the re-run opens the same order again (no duplicate row), once."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from dsmo_examples.orders.db import OrderDatabase, orders, payments, reservations, shipments
from tests.conftest import Harness
from tests.rewind_flow import waiting_at

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
ORDER = {
    "customer": "ana",
    "productId": "lamp",
    "quantity": 2,
    "amount": 49.5,
    "card": "4242 4242 4242 4242",
    "address": "Calle Mayor 1, Madrid",
}


def saga_then_confirm() -> AgentDefinition:
    """The example saga with a wait for the customer's confirmation after the shipment: a run to rewind."""
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / "order_saga.yaml").read_text())
    data["agent"] = f"order-rewind-{uuid.uuid4().hex[:8]}"
    data["nodes"]["create_shipment"]["next"] = "confirm"
    data["nodes"]["confirm"] = {"actionType": "wait_for_response", "parameters": {"timeout": "1d"}}
    return parse_definition(data)


async def test_the_order_saga_rewinds_to_create_order_and_ships_once(harness: Harness, order_db: OrderDatabase) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(saga_then_confirm(), {"order": ORDER})
    await waiting_at(harness, run_id, "confirm")
    assert order_db.stock("lamp") == (8, 0)

    await dsmo.rewind(
        run_id, "create_order", reason="wrong quantity", set_variables={"order": {**ORDER, "quantity": 1}}
    )
    await waiting_at(harness, run_id, "confirm")
    await dsmo.respond(run_id, "ok", event_id=f"{run_id}-ok")
    assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED

    order = order_db.row(orders, run_id)
    assert order is not None and (order["status"], order["quantity"]) == ("shipped", 1)
    for table in (reservations, payments, shipments):
        assert order_db.count(table, order_id=run_id) == 1
    assert order_db.stock("lamp") == (9, 0)  # two went back, one went out
    assert order_db.effects(run_id) == [
        "create_order",
        "reserve_stock",
        "capture_payment",
        "create_shipment",
        "cancel_shipment",
        "refund_payment",
        "release_stock",
        "cancel_order",
        "create_order",
        "reserve_stock",
        "capture_payment",
        "create_shipment",
    ]
