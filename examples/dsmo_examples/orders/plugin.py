"""The order saga's four steps, registered as actions with their compensations.

Each step works on the order database the example's own setting names: ``DSMO_ORDERS_DB_URL``
in the worker's environment (a SQLAlchemy URL, e.g. ``postgresql+psycopg://...``), by default a
SQLite file ``orders.db`` in the worker's state folder. Each database is opened once per URL.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsmo.activities.actions import ActionContext
from dsmo.activities.plugins import action
from dsmo_examples.orders.db import OrderDatabase
from dsmo_examples.orders.order_steps import STEPS, Step

ORDERS_DB_URL = "DSMO_ORDERS_DB_URL"

_databases: dict[str, OrderDatabase] = {}
_opening = threading.Lock()


def database_url(state_dir: Path, environ: Mapping[str, str] = os.environ) -> str:
    """The order database's URL: ``DSMO_ORDERS_DB_URL``, else SQLite in ``state_dir``.

    Args:
        state_dir: The worker's state folder (``DSMO_STATE_DIR``).
        environ: Where the setting is read (the process environment by default).

    Returns:
        A SQLAlchemy URL.
    """
    return environ.get(ORDERS_DB_URL) or f"sqlite:///{state_dir / 'orders.db'}"


def database(ctx: ActionContext) -> OrderDatabase:
    """The order database of the worker that runs ``ctx``'s action.

    Raises:
        RuntimeError: The action was called without the worker's settings.
    """
    if ctx.settings is None:
        raise RuntimeError("the order actions need the worker's settings")
    url = database_url(ctx.settings.state_dir)
    with _opening:
        if url not in _databases:
            _databases[url] = OrderDatabase(url)
        return _databases[url]


def _register(step_class: type[Step]) -> None:
    def execute(data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
        return step_class(database(ctx)).execute(data, ctx)

    def compensate(output: dict[str, Any], ctx: ActionContext) -> bool:
        return step_class(database(ctx)).compensate(output, ctx)

    action(step_class.name, compensate=compensate)(execute)


for _step in STEPS:
    _register(_step)
