"""The order database (SQLite file by default, PostgreSQL by URL) with the seed's tables.

Besides orders, reservations, inventory and payments (and shipments), two ledgers make every
effect once-only: `operations` (forward steps, by `op:{run}:{node}`) and `compensations` (by
`comp:{run}:{node}`), each written in the same transaction as the effect it guards. `saga_log`
records effects in commit order, which is how tests see the LIFO order of compensations.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Connection,
    DateTime,
    Engine,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    event,
    insert,
    select,
    update,
)

metadata = MetaData()

inventory = Table(
    "inventory",
    metadata,
    Column("product_id", String(64), primary_key=True),
    Column("stock", Integer, nullable=False),
    Column("reserved", Integer, nullable=False, default=0),
)
orders = Table(
    "orders",
    metadata,
    Column("id", String(200), primary_key=True),
    Column("customer", String(200), nullable=False),
    Column("product_id", String(64), nullable=False),
    Column("quantity", Integer, nullable=False),
    Column("amount", Float, nullable=False),
    Column("status", String(20), nullable=False),  # pending, confirmed, shipped, cancelled
    Column("created_at", DateTime(timezone=True), nullable=False),
)
reservations = Table(
    "reservations",
    metadata,
    Column("id", String(220), primary_key=True),
    Column("order_id", String(200), nullable=False, unique=True),
    Column("product_id", String(64), nullable=False),
    Column("quantity", Integer, nullable=False),
    Column("status", String(20), nullable=False),  # active, released, fulfilled
    Column("created_at", DateTime(timezone=True), nullable=False),
)
payments = Table(
    "payments",
    metadata,
    Column("id", String(220), primary_key=True),
    Column("order_id", String(200), nullable=False, unique=True),
    Column("amount", Float, nullable=False),
    Column("status", String(20), nullable=False),  # captured, refunded
    Column("created_at", DateTime(timezone=True), nullable=False),
)
shipments = Table(
    "shipments",
    metadata,
    Column("id", String(220), primary_key=True),
    Column("order_id", String(200), nullable=False, unique=True),
    Column("address", String(500), nullable=False),
    Column("status", String(20), nullable=False),  # created, cancelled
    Column("created_at", DateTime(timezone=True), nullable=False),
)
operations = Table(
    "operations",
    metadata,
    Column("key", String(300), primary_key=True),
    Column("action", String(64), nullable=False),
    Column("result", JSON, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
)
compensations = Table(
    "compensations",
    metadata,
    Column("id", String(300), primary_key=True),
    Column("status", String(20), nullable=False),  # completed
    Column("completed_at", DateTime(timezone=True), nullable=False),
)
saga_log = Table(
    "saga_log",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("order_id", String(200), nullable=False),
    Column("effect", String(64), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
)
faults = Table(
    "faults",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("remaining", Integer, nullable=False),
)


def now() -> datetime:
    return datetime.now(UTC)


class OrderDatabase:
    """One engine for the worker's threads; SQLite gets WAL and immediate write transactions."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine: Engine = create_engine(url, future=True, **_engine_options(url))
        if url.startswith("sqlite"):
            _sqlite_writes_serialize(self.engine)
        metadata.create_all(self.engine)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            yield conn

    # -- helpers used by the actions and the tests ---------------------------------------------

    def stock(self, product_id: str) -> tuple[int, int]:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(inventory.c.stock, inventory.c.reserved).where(inventory.c.product_id == product_id)
            ).one()
            return int(row.stock), int(row.reserved)

    def set_stock(self, product_id: str, stock: int) -> None:
        with self.transaction() as conn:
            if (
                conn.execute(
                    update(inventory).where(inventory.c.product_id == product_id).values(stock=stock, reserved=0)
                ).rowcount
                == 0
            ):
                conn.execute(insert(inventory).values(product_id=product_id, stock=stock, reserved=0))

    def inject_fault(self, name: str, times: int) -> None:
        with self.transaction() as conn:
            if conn.execute(update(faults).where(faults.c.name == name).values(remaining=times)).rowcount == 0:
                conn.execute(insert(faults).values(name=name, remaining=times))

    def row(self, table: Table, order_id: str) -> dict[str, Any] | None:
        column = table.c.id if table is orders else table.c.order_id
        with self.engine.connect() as conn:
            found = conn.execute(select(table).where(column == order_id)).mappings().first()
            return dict(found) if found else None

    def effects(self, order_id: str) -> list[str]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(saga_log.c.effect).where(saga_log.c.order_id == order_id).order_by(saga_log.c.seq)
            )
            return [row.effect for row in rows]

    def count(self, table: Table, **where: Any) -> int:
        query = select(table)
        for name, value in where.items():
            query = query.where(table.c[name] == value)
        with self.engine.connect() as conn:
            return len(conn.execute(query).all())


def _engine_options(url: str) -> dict[str, Any]:
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": 30, "check_same_thread": False}}
    return {"pool_pre_ping": True}


def _sqlite_writes_serialize(engine: Engine) -> None:
    # SQLAlchemy's documented recipe: let SQLAlchemy emit BEGIN, and make it IMMEDIATE so two
    # writers never both hold a read lock and then deadlock upgrading it (no oversell, no "locked").
    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
