"""The support agent of the tools guide and the order service its tools call, shared by the
tool-loop tests (and the golden-history recorder)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import yaml

from dsmo.activities.actions import ActionContext
from dsmo.activities.plugin_errors import ActionRefused
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness

ORDERS = {
    "A-1": {"order": "A-1", "total": 42.5, "status": "delivered"},
    "B-7": {"order": "B-7", "total": 120.0, "status": "delivered"},  # a refund of it waits for a person
}


GUIDE = Path(__file__).resolve().parents[3] / "docs" / "tools.md"


def support(agent: str, **think: Any) -> dict[str, Any]:
    """The support agent of the tools guide, as written there (look up, refund, answer; a person
    takes what breaks the rules), with ``think`` changed where a test says so."""
    text = GUIDE.read_text()
    definition = yaml.safe_load(text.split("```yaml\n", 1)[1].split("```", 1)[0])
    definition["agent"] = agent
    definition["nodes"]["think"].update(think)
    return cast(dict[str, Any], definition)


TICKET = {"ticket": {"text": "My parcel arrived broken, I want my money back", "order": "A-1"}}


class OrderService:
    """The tools' system: lookups, and refunds applied once per idempotency key (a ledger)."""

    def __init__(self) -> None:
        self.lookups = 0
        self.ledger: dict[str, dict[str, Any]] = {}

    def lookup(self, data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
        self.lookups += 1
        if data["order"] not in ORDERS:
            raise ActionRefused(f"no order {data['order']}")
        return ORDERS[data["order"]]

    def refund(self, data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
        applied = self.ledger.setdefault(ctx.key, {"order": data["order"], "amount": data["amount"]})
        return {"refunded": applied["amount"], "order": applied["order"]}


async def run(harness: Harness, definition: dict[str, Any]) -> tuple[str, Any]:
    run_id = await harness.start(parse_definition(definition), TICKET)
    return run_id, await asyncio.wait_for(harness.dsmo.result(run_id), 60)


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [message for message in request["messages"] if message["role"] == "tool"]
