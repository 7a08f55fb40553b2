"""The order saga's four steps, registered as actions with their compensations.

Each step works on the order database named by the worker's settings (``DSMO_ORDERS_DB_URL``,
default SQLite under the state folder), opened once per URL.
"""

from __future__ import annotations

import threading
from typing import Any

from dsmo.activities.actions import ActionContext
from dsmo.activities.orders.actions import STEPS, Step
from dsmo.activities.orders.db import OrderDatabase
from dsmo.activities.plugins import action

_databases: dict[str, OrderDatabase] = {}
_opening = threading.Lock()


def database(ctx: ActionContext) -> OrderDatabase:
    """The order database of the worker that runs ``ctx``'s action."""
    if ctx.settings is None:
        raise RuntimeError("the order actions need the worker's settings")
    url = ctx.settings.orders_db_url
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
