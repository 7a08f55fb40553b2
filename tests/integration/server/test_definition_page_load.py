"""A definition page with 500 nodes: drawn off the event loop, plainly, once, while the server goes
on answering every other request."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.studies.hostile.memory import large_graph
from dsmo.activities.definition_store import DefinitionStore
from dsmo.server.api_keys import KeyStore
from dsmo.server.console import graph_layout
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness
from tests.console_session import sign_in
from tests.ingress_server import serving

pytestmark = pytest.mark.integration
HANG_GUARD = 60.0  # seconds; a guard against hanging for ever, never a measure


def large_definition(agent: str, nodes: int = 500) -> AgentDefinition:
    return parse_definition(large_graph(agent, nodes))


@pytest.fixture
def served(harness: Harness, tmp_path: Path) -> Iterator[tuple[str, str]]:
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    key = KeyStore(settings.api_keys_path).add("reader", ["read"])
    with serving(settings) as url:
        yield url, key


async def test_a_500_node_page_is_drawn_while_other_requests_are_answered(
    harness: Harness, served: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, key = served
    definition = large_definition(f"large-{harness.task_queue}")
    DefinitionStore(harness.store).publish(definition)
    laying_out, released = threading.Event(), threading.Event()
    layouts: list[int] = []
    original = graph_layout.layout_graph

    def held(*args: Any, **kwargs: Any) -> graph_layout.Drawing:
        # The layout waits here until the test has been answered elsewhere (or the guard ends).
        layouts.append(len(args[0]))
        laying_out.set()
        released.wait(HANG_GUARD)
        return original(*args, **kwargs)

    monkeypatch.setattr(graph_layout, "layout_graph", held)
    with httpx.Client(base_url=url, timeout=HANG_GUARD * 2) as browser:
        await asyncio.to_thread(sign_in, browser, key)
        page_answer = asyncio.ensure_future(asyncio.to_thread(browser.get, f"/console/definitions/{definition.agent}"))
        assert await asyncio.to_thread(laying_out.wait, HANG_GUARD), "the page never began its layout"
        with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=HANG_GUARD / 2) as api:
            try:
                other = await asyncio.to_thread(api.get, "/executions/no-such-run")
            except httpx.TimeoutException:
                other = None
        answered_while_laying_out = not released.is_set() and other is not None
        released.set()
        page = await page_answer
        again = await asyncio.to_thread(browser.get, f"/console/definitions/{definition.agent}")
    assert answered_while_laying_out, "another request waited for the definition page's layout"
    assert other is not None and other.status_code == 404 and other.json()["error"]["code"] == "run_not_found"
    assert page.status_code == 200 and again.status_code == 200
    assert page.text.count('class="node') == 500 and 'data-node="n499"' in page.text
    assert "drawn plainly" in page.text and "500 nodes, " in page.text
    assert layouts == [500], "the version's drawing is made once and kept"
    assert len(page.text) < 1_500_000  # 4.1 MB before: every edge routed through the layers


def test_a_large_graph_is_laid_out_plainly_without_overlaps() -> None:
    drawing = graph_layout.layout(large_definition("large"))
    assert drawing.plain and len(drawing.boxes) == 500
    boxes = sorted(drawing.boxes.values(), key=lambda box: (box.y, box.x))
    for one, other in itertools.pairwise(boxes):  # neighbours in reading order do not overlap
        assert abs(one.x - other.x) >= one.w or abs(one.y - other.y) >= one.h, (one.node, other.node)
    assert drawing.boxes["n0"].y < drawing.boxes["n1"].y < drawing.boxes["n2"].y  # rows by distance from the start
    assert not graph_layout.layout(large_definition("small", nodes=12)).plain
