"""The support agent's tools as a user's plugin, over an order service that keeps a ledger on disk
(`SUPPORT_LEDGER_DIR`): a worker process started with ``DSMO_LOAD=tests.support_tools_plugin``
serves them (tests/integration/llm/test_tool_loop_crashes.py), and a killed worker loses nothing.

A refund is applied once per idempotency key, as a real payment service does: the ledger holds
one file per key, created exclusively. With ``pause-after-refund`` in the ledger's folder, the
action stops after applying the refund and before answering (it writes ``refund-applied`` and
waits), so a test can kill the worker between the effect and its record.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import dsmo
from dsmo.errors import ActionRefused

ORDERS = {
    "A-1": {"order": "A-1", "total": 42.5, "status": "delivered"},
    "B-7": {"order": "B-7", "total": 120.0, "status": "delivered"},  # its refund waits for a person
}


def _ledger() -> Path:
    folder = Path(os.environ["SUPPORT_LEDGER_DIR"])
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dsmo.action("lookup-order")
def lookup_order(data: dict[str, Any], ctx: Any) -> dict[str, Any]:
    if data["order"] not in ORDERS:
        raise ActionRefused(f"no order {data['order']}")
    return ORDERS[data["order"]]


@dsmo.action("refund-order")
def refund_order(data: dict[str, Any], ctx: Any) -> dict[str, Any]:
    folder = _ledger()
    entry = folder / f"refund-{ctx.key.replace(':', '_')}.json"
    try:
        with entry.open("x") as created:  # applied once per key, whoever asks again
            json.dump({"order": data["order"], "amount": data["amount"], "attempt": ctx.attempt}, created)
    except FileExistsError:
        pass
    if (folder / "pause-after-refund").exists():
        (folder / "refund-applied").write_text(ctx.key)
        time.sleep(600)  # the test kills the worker here: applied, not yet answered
    applied = json.loads(entry.read_text())
    return {"refunded": applied["amount"], "order": applied["order"]}
