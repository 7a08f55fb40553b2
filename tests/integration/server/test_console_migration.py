"""The console and moved runs, over plain HTTP: open runs per version with dry runs, and a move in the trail."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from dsmo.server.api_keys import KeyStore
from dsmo.server.console import open_runs
from tests.conftest import Harness
from tests.console_session import sign_in, text_of
from tests.ingress_server import serving
from tests.migration_versions import V1, V2, history_length, new_agent, published, waiting_on, waiting_run
from tests.polling import until_value

pytestmark = pytest.mark.integration


@dataclass
class Served:
    url: str
    key: str

    def browser(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60)


@pytest.fixture
def served(harness: Harness, tmp_path: Path) -> Iterator[Served]:
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    key = KeyStore(settings.api_keys_path).add("person", ["read"])
    with serving(settings) as url:
        yield Served(url, key)


async def open_counts(browser: httpx.Client, agent: str, expected: dict[str, int]) -> str:
    """The definition page once visibility counts ``expected`` open runs per workflow version."""

    async def definition_page() -> str:
        return (await asyncio.to_thread(browser.get, f"/console/definitions/{agent}")).text

    def counted(page: str) -> bool:
        counts = re.findall(r'<tr data-version="([0-9a-f]{12})">.*?<td class="count">(\d+)</td>', page)
        return {version: int(count) for version, count in counts} == expected

    return await until_value(definition_page, counted, f"the definition page counts {expected}")


async def test_the_definition_page_counts_open_runs_and_dry_runs_moving_them(
    harness: Harness, served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsmo, agent = harness.dsmo, new_agent()
    v1 = await published(dsmo, V1, agent)
    v2 = await published(dsmo, V2, agent)
    # The latest version keeps version 1's nodes (a new message): version 2's renamed node has no counterpart.
    v3 = await published(dsmo, V1.replace('"1.0.0"', '"3.0.0"').replace("Welcome", "Welcome aboard"), agent)
    first, second, renamed = [await waiting_run(harness, version) for version in (v1, v1, v2)]
    history = await history_length(dsmo, first)
    with served.browser() as browser:
        await asyncio.to_thread(sign_in, browser, served.key)
        counts = {v1.workflow_version: 2, v2.workflow_version: 1, v3.workflow_version: 0}
        page = await open_counts(browser, agent, counts)
        monkeypatch.setattr(open_runs, "DRY_RUNS_PER_PAGE", 2)
        capped = text_of((await asyncio.to_thread(browser.get, f"/console/definitions/{agent}")).text)
    words = text_of(page)
    assert f"3.0.0 (latest) {v3.workflow_version} 0" in words
    assert f"1.0.0 {v1.workflow_version} 2" in words and f"2.0.0 {v2.workflow_version} 1" in words
    assert f"Moving the open runs of 1.0.0 {v1.workflow_version} to 3.0.0 {v3.workflow_version} (dry run)" in words
    for run_id in (first, second):
        assert f"{run_id}: would move documents → documents, still waiting" in words
        assert f'href="/console/runs/{run_id}"' in page
    # Without a map the move of the renamed node's run is refused, and the page says why.
    assert (
        f"{renamed}: refused: node: 'papers' has no counterpart in version 3.0.0 (map it: --map papers:<node>)" in words
    )
    assert "First" not in words  # every open run was checked
    assert "2 would move, 0 refused." in words and "0 would move, 1 refused." in words
    assert "This page only checks moves. Runs move with dsmo runs migrate" in words
    assert "<form" not in page.split("Open runs by version")[1]  # nothing on the page moves a run
    # With room for two dry runs, the newer old version's run is checked first, then one of version 1's.
    assert "First 1 of 2 (at most 2 runs are checked on a page load)" in capped
    assert f"{renamed}: refused" in capped and capped.count("would move documents → documents") == 1
    assert await history_length(dsmo, first) == history  # the dry runs sent nothing to the runs
    for run_id in (first, second, renamed):
        await dsmo.cancel(run_id, reason="test over")


async def test_a_moved_runs_page_shows_the_move_and_links_both_versions(harness: Harness, served: Served) -> None:
    dsmo, agent = harness.dsmo, new_agent()
    v1 = await published(dsmo, V1, agent)
    v2 = await published(dsmo, V2, agent)
    run_id = await waiting_run(harness, v1)
    await dsmo.migrate_run(
        run_id, v2, node_map={"documents": "papers"}, set_variables={"priority": "high"}, reason="typo", by="ops"
    )
    await waiting_on(dsmo, run_id, v2.workflow_version)
    with served.browser() as browser:
        await asyncio.to_thread(sign_in, browser, served.key)
        answer = await asyncio.to_thread(browser.get, f"/console/runs/{run_id}")
    assert answer.status_code == 200, answer.text[:300]
    page, words = answer.text, text_of(answer.text)
    for version in (v1, v2):
        assert f'href="/console/definitions/{agent}?version={version.workflow_version}"' in page
    assert f"Moved between versions: 1.0.0 {v1.workflow_version} → 2.0.0 {v2.workflow_version}" in words
    assert (
        f"Moved from version 1.0.0 {v1.workflow_version} at documents to version 2.0.0 {v2.workflow_version} "
        "at papers, node map documents → papers, set priority; asked by ops: “typo”." in words
    )
    await dsmo.cancel(run_id, reason="test over")


async def test_a_run_whose_worker_is_down_is_listed_as_unchecked_without_holding_the_page(
    harness: Harness, served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsmo, agent = harness.dsmo, new_agent()
    v1 = await published(dsmo, V1, agent)
    v3 = await published(dsmo, V1.replace('"1.0.0"', '"3.0.0"'), agent)
    # No worker polls this queue: the run answers no query (Temporal would give up after ~10 s).
    stranded = (await dsmo.start(v1, {"candidate": "ana"}, task_queue=f"nobody-polls-{agent}")).run_id
    monkeypatch.setattr(open_runs, "DRY_RUN_SECONDS", 0.5)
    with served.browser() as browser:
        await asyncio.to_thread(sign_in, browser, served.key)
        page = await open_counts(browser, agent, {v1.workflow_version: 1, v3.workflow_version: 0})
    assert f"{stranded}: not checked: no answer in 0.5 s (is its worker running?)" in text_of(page)
    await dsmo.temporal.get_workflow_handle(stranded).terminate(reason="test over")
