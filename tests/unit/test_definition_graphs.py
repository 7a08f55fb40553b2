"""Definition pages' drawings: made once per version however many ask at once, kept up to a
bound, and made again after a failure instead of failing for ever."""

from __future__ import annotations

import asyncio
import threading

import pytest

from dsmo.server.console import definition_graphs
from dsmo.server.console.definition_graphs import DefinitionGraphs, DrawnGraph
from dsmo.workflows.definition.model import AgentDefinition, parse_definition


def version(message: str) -> AgentDefinition:
    node = {"actionType": "send_message", "parameters": {"message": message}}
    return parse_definition({"agent": "drawn", "start": "a", "nodes": {"a": node}})


async def test_a_drawing_is_made_once_kept_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    release = threading.Event()

    def draw(shown: AgentDefinition, older: AgentDefinition | None) -> DrawnGraph:
        made.append(shown.workflow_version)
        release.wait(30)  # held until every asker is waiting: they must share this one drawing
        return DrawnGraph(f"<svg>{shown.workflow_version}</svg>", plain=False)

    monkeypatch.setattr(definition_graphs, "draw", draw)
    graphs, one, two = DefinitionGraphs(size=1), version("one"), version("two")
    askers = [asyncio.ensure_future(graphs.get(one)) for _ in range(5)]
    await asyncio.sleep(0)
    release.set()
    drawn = await asyncio.gather(*askers)
    assert made == [one.workflow_version] and len({id(answer) for answer in drawn}) == 1
    await graphs.get(one)
    assert made == [one.workflow_version]  # kept
    await graphs.get(two)
    await graphs.get(one)  # the bound is one drawing: `one` went when `two` came
    assert made == [one.workflow_version, two.workflow_version, one.workflow_version]


async def test_a_failed_drawing_is_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[int] = []

    def draw(shown: AgentDefinition, older: AgentDefinition | None) -> DrawnGraph:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("out of memory, once")
        return DrawnGraph("<svg/>", plain=False)

    monkeypatch.setattr(definition_graphs, "draw", draw)
    graphs = DefinitionGraphs()
    with pytest.raises(RuntimeError):
        await graphs.get(version("one"))
    assert (await graphs.get(version("one"))).svg == "<svg/>" and len(attempts) == 2
