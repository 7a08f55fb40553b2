"""The order example owns its database setting: DSMO's Settings do not know it, the example's
actions read ``DSMO_ORDERS_DB_URL`` themselves and default to SQLite in the worker's state folder."""

from __future__ import annotations

from pathlib import Path

from dsmo.config.settings import ENVIRONMENT, Settings
from dsmo_examples.orders.plugin import ORDERS_DB_URL, database_url


def test_dsmo_settings_do_not_know_the_orders_database() -> None:
    assert ORDERS_DB_URL not in ENVIRONMENT
    assert ORDERS_DB_URL not in Settings.from_env({ORDERS_DB_URL: "sqlite:///elsewhere.db"}).to_env()


def test_the_order_example_reads_its_own_setting_or_uses_the_state_folder(tmp_path: Path) -> None:
    assert database_url(tmp_path, {}) == f"sqlite:///{tmp_path / 'orders.db'}"
    url = "postgresql+psycopg://orders:orders@db:5432/orders"
    assert database_url(tmp_path, {ORDERS_DB_URL: url}) == url
    assert database_url(tmp_path, {ORDERS_DB_URL: ""}) == f"sqlite:///{tmp_path / 'orders.db'}"  # empty is unset
