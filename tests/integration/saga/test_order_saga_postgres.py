"""The order saga's scenarios again, on a real PostgreSQL instead of SQLite.

SQLite serializes writers (`BEGIN IMMEDIATE`); PostgreSQL runs the same transactions concurrently
at READ COMMITTED, so oversell, double compensation and idempotency are checked where they could
actually race. The server is PostgreSQL from pgserver's wheel (no system install, no Docker),
one per module, on a Unix socket in a temporary folder.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsmo_examples.orders.db import OrderDatabase, metadata
from tests.integration.saga.test_order_saga import (
    test_failed_compensation_listed_then_retried_by_hand,
    test_happy_path_commits_every_step,
    test_payment_fails_stock_released_and_order_cancelled,
    test_shipment_fails_refund_release_cancel_in_that_order,
    test_twenty_concurrent_sagas_never_oversell,
)

# Collected here with this module's `order_db`: the same tests, on PostgreSQL.
__all__ = [
    "test_failed_compensation_listed_then_retried_by_hand",
    "test_happy_path_commits_every_step",
    "test_payment_fails_stock_released_and_order_cancelled",
    "test_shipment_fails_refund_release_cancel_in_that_order",
    "test_twenty_concurrent_sagas_never_oversell",
]

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: no XDG_RUNTIME_DIR in CI
        from pgserver.postgres_server import get_server

    data: Path = tmp_path_factory.mktemp("pg")
    server = get_server(data, cleanup_mode="stop")
    try:
        yield f"postgresql+psycopg://postgres@/postgres?host={data}"
    finally:
        server.cleanup()


@pytest.fixture
def order_db(postgres_url: str) -> Iterator[OrderDatabase]:
    db = OrderDatabase(postgres_url)
    assert db.engine.dialect.name == "postgresql"
    # Every test starts from empty tables, as the SQLite fixture's fresh file does.
    metadata.drop_all(db.engine)
    metadata.create_all(db.engine)
    db.set_stock("lamp", 10)
    yield db
    db.engine.dispose()
