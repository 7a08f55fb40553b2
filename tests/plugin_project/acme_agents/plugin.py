"""One async agent with schemas, two actions (one compensatable) and a channel, written as a user would."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import dsmo


class Applicant(BaseModel):
    income: float
    debts: float = 0.0


SCORE = {"type": "object", "required": ["score"], "properties": {"score": {"type": "number", "minimum": 0}}}
BAND = {"type": "object", "required": ["band"], "properties": {"band": {"enum": ["low", "high"]}}}


@dsmo.agent("risk-score", version="1.0.0", input_schema=Applicant, output_schema=SCORE, summary_schema=BAND)
async def risk_score(document: dict[str, Any], message: dsmo.StageMessage) -> tuple[dict[str, Any], dict[str, Any]]:
    """Debts over income, banded."""
    await asyncio.sleep(0.01)  # an awaited call, as a model or HTTP request would be
    score = document.get("debts", 0.0) / max(document["income"], 1.0)
    return {"score": score, "run": message.run_id}, {"band": "high" if score > 0.5 else "low"}


def _ledger(line: str) -> None:
    with Path(os.environ["ACME_LEDGER"]).open("a") as ledger:
        ledger.write(line + "\n")


def release_funds(output: dict[str, Any], ctx: dsmo.ActionContext) -> None:
    _ledger(f"release {output['held']} {ctx.run_id}")


@dsmo.action("hold-funds", compensate=release_funds)
def hold_funds(data: dict[str, Any], ctx: dsmo.ActionContext) -> dict[str, Any]:
    _ledger(f"hold {data['amount']} {ctx.run_id}")
    return {"held": data["amount"], "status": "held"}


@dsmo.action("approve")
def approve(data: dict[str, Any], ctx: dsmo.ActionContext) -> dict[str, Any]:
    if data.get("band") != "low":
        raise dsmo.ActionRefused("declined: the risk band is not low")
    return {"approved": True}


class MemoChannel:
    """Writes each message to a file named by its idempotency key."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def send(self, message: dsmo.SendMessageRequest) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"{message.idempotency_key}.txt").write_text(f"{message.to}: {message.message}")


@dsmo.channel("memo")
def memo(settings: dsmo.Settings) -> MemoChannel:
    return MemoChannel(Path(os.environ["ACME_MEMOS"]))
