"""The team's own orchestration code: a plain Temporal workflow, and where its DSMO definitions live."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from temporalio import workflow

DEFINITIONS = Path(__file__).resolve().parent.parent / "definitions"


@workflow.defn
class Greeting:
    """A workflow of the team's own, unrelated to DSMO; only its import name matters here."""

    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity("greet", name, start_to_close_timeout=timedelta(seconds=5))
