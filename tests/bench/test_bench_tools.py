"""The tools study (`make bench TOOLS=1`) runs its quick variant end to end and its section is computed."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bench.studies.tools.study import QUICK_TURNS, Tools
from bench.studies.tools.tools_report import END, START
from dsmo.config.settings import Settings
from dsmo.devstack.stack import DevStack

pytestmark = pytest.mark.integration


async def test_the_quick_tools_study_measures_both_contenders_per_turn(
    stack_settings: Settings, tmp_path: Path
) -> None:
    @contextlib.asynccontextmanager
    async def stack() -> AsyncIterator[tuple[Settings, DevStack | None]]:
        yield stack_settings.with_changes(worker={"metrics_bind": ""}), None

    study = Tools(out_dir=tmp_path)
    results = await study.run(True, stack)

    tools = results["tools"]
    assert tools["turns"] == QUICK_TURNS and tools["model_round_trip_ms"] > 0
    assert set(tools["contenders"]) == {"dsmo", "langgraph"}
    for measured in tools["contenders"].values():
        # Every lookup the script asked for was made, then the model answered once more.
        assert measured["turns"] == QUICK_TURNS and measured["model_calls"] == QUICK_TURNS + 1
        figures = measured["per_turn"]
        assert figures["wall_ms"] > figures["overhead_ms"] > 0 and figures["model_ms"] > 0
        assert figures["cpu_ms"]["process"] > 0 and figures["cpu_ms"]["total"] >= figures["cpu_ms"]["process"]
        assert figures["state_records"] > 0 and figures["state_bytes"] > 0
    # DSMO's figures name its three processes; LangGraph's its two.
    assert set(tools["contenders"]["dsmo"]["cpu_s"]) == {"process", "server", "store"}
    assert set(tools["contenders"]["langgraph"]["cpu_s"]) == {"process", "server"}
    assert tools["contenders"]["dsmo"]["state"]["what"] == "history events"

    section = study.section(results)
    assert section is not None and section.startswith(START) and section.endswith(END)
    assert "| DSMO | 5 |" in section and "| LangGraph + AsyncPostgresSaver | 5 |" in section
    saved = [json.loads(path.read_text()) for path in tmp_path.glob("tools-*.json")]
    assert len(saved) == 1 and saved[0]["tools"]["turns"] == QUICK_TURNS
