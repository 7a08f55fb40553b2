"""An MCP server over stdio (the `mcp` package's FastMCP) with one tool, `lookup`, for the tool
tests: the worker starts it per call as ``stdio:PYTHON tests/mcp_stdio_orders.py LOG``. Each call
appends the order and the idempotency key it got in its ``_meta`` to LOG, one JSON line each."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mcp.server.fastmcp import Context, FastMCP

ORDERS = {"A-1": {"order": "A-1", "total": 42.5, "status": "delivered"}}
server = FastMCP("orders")


@server.tool()
def lookup(order: str, ctx: Context) -> dict[str, Any]:  # type: ignore[type-arg]
    """An order's status and total."""
    meta = ctx.request_context.meta
    key = getattr(meta, "idempotencyKey", None) if meta is not None else None
    with Path(sys.argv[1]).open("a") as log:
        log.write(json.dumps({"order": order, "key": key}) + "\n")
    if order not in ORDERS:
        raise ValueError(f"no order {order}")
    return ORDERS[order]


if __name__ == "__main__":
    server.run("stdio")
