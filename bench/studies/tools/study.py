"""The tools study behind the `Study` protocol: `python -m bench tools` (`make bench TOOLS=1`).

Issue 55: a tool-using agent's per-turn orchestration overhead and CPU, DSMO beside the same
agent on LangGraph with a Postgres checkpointer, the same stub model, one run each.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.paths import RESULTS
from bench.report import machine
from bench.section_files import publish_section
from bench.stack import Stack
from bench.studies.tools.agent import first_messages, offered_tools, support
from bench.studies.tools.model import stub_model
from bench.studies.tools.tools_report import END, START, per_turn, section

MARKERS = START, END
TURNS, QUICK_TURNS = 20, 5  # lookups before the answer
ROUND_TRIPS = 50  # direct calls the model's own time per call is the median of


@dataclass
class Tools:
    """The support agent's tool loop on DSMO and on LangGraph; writes ``tools-<stamp>.json`` under ``out_dir``."""

    out_dir: Path = field(default=RESULTS)
    name: str = "tools"
    markers: tuple[str, str] | None = MARKERS

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """Both contenders, ``TURNS`` lookups each (``QUICK_TURNS`` when ``quick``); prints the
        section and saves the results.

        DSMO runs on ``stack()``; LangGraph on a PostgreSQL started for it, after the stack is
        closed, so neither pays for the other's servers.

        Raises:
            RuntimeError: A run did not end with the scripted answer, or made other than
                ``turns`` lookups.
        """
        from bench.studies.tools.dsmo_side import dsmo_side
        from bench.studies.tools.langgraph_side import langgraph_side  # imports LangGraph: only when run

        turns = QUICK_TURNS if quick else TURNS
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        command = "make bench TOOLS=1" + (" QUICK=1" if quick else "")
        results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": command}
        began = time.perf_counter()
        with stub_model() as model:
            async with stack() as (settings, _):
                contenders = {"dsmo": await dsmo_side(settings, model, turns)}
            contenders["langgraph"] = await langgraph_side(model, turns)
            definition = support(turns)
            body = {"model": "local-chat-1", "messages": first_messages(definition), "tools": offered_tools(definition)}
            round_trip_s = model.round_trip_s(body, ROUND_TRIPS)
        for name, measured in contenders.items():
            if measured["turns"] != turns:
                raise RuntimeError(f"tools study: {name} made {measured['turns']} lookups, not {turns}")
            measured["per_turn"] = per_turn(measured, round_trip_s)
        results["tools"] = {"turns": turns, "model_round_trip_ms": round_trip_s * 1000, "contenders": contenders}
        results["seconds"] = round(time.perf_counter() - began, 1)
        publish_section(results, name="tools", text=section(results), markers=MARKERS, out_dir=self.out_dir, page=None)
        return results

    def section(self, results: dict[str, Any]) -> str | None:
        """The tools section; None when it did not run."""
        return section(results)
