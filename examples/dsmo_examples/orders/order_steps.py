"""The four compensable steps of the order saga (the seed's CompensableAction, on the database).

Each step and each compensation runs in one transaction together with its ledger row, so a
retried activity (or a repeated compensation) finds the ledger and applies nothing twice.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table, insert, select, update

from dsmo.activities.actions import ActionContext, ActionRegistry
from dsmo.activities.plugin_errors import ActionRefused, InvalidInput
from dsmo_examples.orders.db import (
    OrderDatabase,
    compensations,
    faults,
    inventory,
    now,
    operations,
    orders,
    payments,
    reservations,
    saga_log,
    shipments,
)


class GatewayUnavailable(RuntimeError):
    """The (simulated) payment gateway is down: transient, the compensation is retried."""


def _field(data: dict[str, Any], name: str, kind: type) -> Any:
    value = data.get(name)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (isinstance(value, str) and not value.strip()):
        raise InvalidInput(f"input.{name}: a {kind.__name__} is required")
    return value


def _reopen(
    conn: Connection, table: Table, row: Any, values: dict[str, Any], *, undone: tuple[str, ...] = ("cancelled",)
) -> bool:
    """Bring back a row its compensation undid (a status in ``undone``) with ``values``; False if none.

    Each row is keyed by the order (the run): a run sent back before a step does it again under
    a new key, on the row the undo left. A row still in effect is not taken twice.

    Raises:
        ActionRefused: The row exists and was not undone (the step is still in effect).
    """
    found = conn.execute(select(table.c.status).where(row)).first()
    if found is None:
        return False
    if found.status not in undone:
        raise ActionRefused(f"{table.name}: {found.status} already for this order (undo it first)")
    conn.execute(update(table).where(row).values(**values))
    return True


class Step:
    """One step of the order saga: its effect and its counter-operation, each once per key."""

    name = ""
    db: OrderDatabase

    def __init__(self, db: OrderDatabase) -> None:
        self.db = db

    def execute(self, data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
        with self.db.transaction() as conn:
            done = conn.execute(select(operations.c.result).where(operations.c.key == ctx.key)).first()
            if done is not None:
                return dict(done.result)  # this step already happened under this key
            result = self._do(conn, data, ctx)
            conn.execute(insert(operations).values(key=ctx.key, action=self.name, result=result, at=now()))
            return result

    def compensate(self, output: dict[str, Any], ctx: ActionContext) -> bool:
        self._fail_if_faulty()
        with self.db.transaction() as conn:
            if conn.execute(select(compensations.c.id).where(compensations.c.id == ctx.key)).first() is not None:
                return False  # compensated before under this key: apply once
            self._undo(conn, output)
            conn.execute(insert(compensations).values(id=ctx.key, status="completed", completed_at=now()))
            return True

    def is_compensatable(self, output: dict[str, Any]) -> bool:
        return True

    def _do(self, conn: Connection, data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
        raise NotImplementedError

    def _undo(self, conn: Connection, output: dict[str, Any]) -> None:
        raise NotImplementedError

    def _fail_if_faulty(self) -> None:
        return None

    @staticmethod
    def _log(conn: Connection, order_id: str, effect: str) -> None:
        conn.execute(insert(saga_log).values(order_id=order_id, effect=effect, at=now()))


class CreateOrder(Step):
    name = "create-order"

    def _do(self, conn: Connection, data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
        order_id = ctx.run_id
        values = {
            "customer": _field(data, "customer", str),
            "product_id": _field(data, "productId", str),
            "quantity": _field(data, "quantity", int),
            "amount": _field(data, "amount", float),
            "status": "pending",
        }
        # A run sent back to `create_order` (a rewind, its order cancelled by the undo) reopens
        # its order: one order per run, whatever the step's key.
        if not _reopen(conn, orders, orders.c.id == order_id, values):
            conn.execute(insert(orders).values(id=order_id, created_at=now(), **values))
        self._log(conn, order_id, "create_order")
        return {"orderId": order_id, "status": "pending"}

    def _undo(self, conn: Connection, output: dict[str, Any]) -> None:
        conn.execute(update(orders).where(orders.c.id == output["orderId"]).values(status="cancelled"))
        self._log(conn, output["orderId"], "cancel_order")

    def is_compensatable(self, output: dict[str, Any]) -> bool:
        return output.get("status") in ("pending", "confirmed")


class ReserveStock(Step):
    name = "reserve-stock"

    def _do(self, conn: Connection, data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
        order_id, product, quantity = (
            _field(data, "orderId", str),
            _field(data, "productId", str),
            _field(data, "quantity", int),
        )
        # One conditional update: stock is reserved only if it is there, so concurrent sagas cannot oversell.
        taken = conn.execute(
            update(inventory)
            .where(inventory.c.product_id == product, inventory.c.stock - inventory.c.reserved >= quantity)
            .values(reserved=inventory.c.reserved + quantity)
        ).rowcount
        if taken == 0:
            raise ActionRefused(f"product {product}: fewer than {quantity} unit(s) available")
        reservation_id = f"res-{order_id}"
        values = {"product_id": product, "quantity": quantity, "status": "active"}
        # A shipped reservation is over once its shipment was cancelled (the goods went back to stock).
        shipped = conn.execute(select(shipments.c.status).where(shipments.c.order_id == order_id)).scalar()
        undone = ("released", "fulfilled") if shipped == "cancelled" else ("released",)
        if not _reopen(conn, reservations, reservations.c.id == reservation_id, values, undone=undone):
            conn.execute(insert(reservations).values(id=reservation_id, order_id=order_id, created_at=now(), **values))
        self._log(conn, order_id, "reserve_stock")
        return {
            "reservationId": reservation_id,
            "orderId": order_id,
            "productId": product,
            "quantity": quantity,
            "status": "active",
        }

    def _undo(self, conn: Connection, output: dict[str, Any]) -> None:
        released = conn.execute(
            update(reservations)
            .where(reservations.c.id == output["reservationId"], reservations.c.status == "active")
            .values(status="released")
        ).rowcount
        if released:
            conn.execute(
                update(inventory)
                .where(inventory.c.product_id == output["productId"])
                .values(reserved=inventory.c.reserved - output["quantity"])
            )
        self._log(conn, output["orderId"], "release_stock")

    def is_compensatable(self, output: dict[str, Any]) -> bool:
        return output.get("status") == "active"


class ProcessPayment(Step):
    name = "process-payment"

    def _do(self, conn: Connection, data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
        order_id, amount, card = _field(data, "orderId", str), _field(data, "amount", float), _field(data, "card", str)
        if card.replace(" ", "").endswith("0002"):
            raise ActionRefused("payment declined by the issuer (card ending 0002)")
        payment_id = f"pay-{order_id}"
        values = {"amount": amount, "status": "captured"}
        if not _reopen(conn, payments, payments.c.id == payment_id, values, undone=("refunded",)):
            conn.execute(insert(payments).values(id=payment_id, order_id=order_id, created_at=now(), **values))
        conn.execute(update(orders).where(orders.c.id == order_id).values(status="confirmed"))
        self._log(conn, order_id, "capture_payment")
        return {"paymentId": payment_id, "orderId": order_id, "amount": amount, "status": "captured"}

    def _undo(self, conn: Connection, output: dict[str, Any]) -> None:
        conn.execute(update(payments).where(payments.c.id == output["paymentId"]).values(status="refunded"))
        self._log(conn, output["orderId"], "refund_payment")

    def _fail_if_faulty(self) -> None:
        with self.db.transaction() as conn:
            left = conn.execute(select(faults.c.remaining).where(faults.c.name == "refund")).scalar()
            if left:
                conn.execute(update(faults).where(faults.c.name == "refund").values(remaining=left - 1))
                failing = True
            else:
                failing = False
        if failing:
            raise GatewayUnavailable("payment gateway unavailable (refund not processed)")


class CreateShipment(Step):
    name = "create-shipment"

    def _do(self, conn: Connection, data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
        order_id, address = _field(data, "orderId", str), str(data.get("address") or "")
        if not address.strip() or address.strip().lower() == "nowhere":
            raise ActionRefused(f"address {address!r} is not deliverable")
        reservation = conn.execute(select(reservations).where(reservations.c.order_id == order_id)).mappings().one()
        conn.execute(update(reservations).where(reservations.c.id == reservation["id"]).values(status="fulfilled"))
        conn.execute(
            update(inventory)
            .where(inventory.c.product_id == reservation["product_id"])
            .values(
                stock=inventory.c.stock - reservation["quantity"],
                reserved=inventory.c.reserved - reservation["quantity"],
            )
        )
        shipment_id = f"ship-{order_id}"
        values = {"address": address, "status": "created"}
        if not _reopen(conn, shipments, shipments.c.id == shipment_id, values):
            conn.execute(insert(shipments).values(id=shipment_id, order_id=order_id, created_at=now(), **values))
        conn.execute(update(orders).where(orders.c.id == order_id).values(status="shipped"))
        self._log(conn, order_id, "create_shipment")
        return {
            "shipmentId": shipment_id,
            "orderId": order_id,
            "status": "created",
            "productId": reservation["product_id"],
            "quantity": reservation["quantity"],
        }

    def _undo(self, conn: Connection, output: dict[str, Any]) -> None:
        # The counter-operation: the goods come back to stock and the shipment is void.
        conn.execute(update(shipments).where(shipments.c.id == output["shipmentId"]).values(status="cancelled"))
        conn.execute(
            update(inventory)
            .where(inventory.c.product_id == output["productId"])
            .values(stock=inventory.c.stock + output["quantity"])
        )
        self._log(conn, output["orderId"], "cancel_shipment")


STEPS: tuple[type[Step], ...] = (CreateOrder, ReserveStock, ProcessPayment, CreateShipment)


def order_actions(db: OrderDatabase, registry: ActionRegistry | None = None) -> ActionRegistry:
    """The four steps on ``db`` (tests and the history recorder use their own database).

    A worker gets the same steps from the order-saga plugin (`orders/plugin.py`), on the
    database ``DSMO_ORDERS_DB_URL`` names.
    """
    registry = registry or ActionRegistry()
    for step_class in STEPS:
        registry.add(step_class(db))
    return registry
