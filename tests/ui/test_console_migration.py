"""Moving runs between versions, as a person sees it in a real browser (Playwright and Debian's Chromium).

The definition page counts open runs per version and shows the dry run of moving a waiting run
to the latest version; after the run is moved (through the client, as `dsmo runs migrate` and the
API do), its page shows the move and links both versions' definition pages.
"""

from __future__ import annotations

import pytest
from playwright.async_api import Browser, Page, expect

from dsmo.workflows.definition.model import AgentDefinition
from tests.conftest import Harness
from tests.migration_versions import V1, new_agent, published, waiting_on, waiting_run
from tests.polling import until
from tests.ui.test_console import CHROMIUM, Console, assert_labelled, browser, console, new_page  # noqa: F401

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make ui-check)"),
]
# The latest version changes a message only: a run of version 1 moves to the node of the same id.
V3 = V1.replace('"1.0.0"', '"3.0.0"').replace("Welcome", "Welcome aboard")


async def until_counted(page: Page, version: AgentDefinition, count: int) -> None:
    """Reload the definition page until visibility counts ``count`` open runs on ``version``."""
    cell = page.locator(f'tr[data-version="{version.workflow_version}"] td.count')

    async def counted() -> bool:  # visibility follows the runs
        if await cell.count() and (await cell.inner_text()).strip() == str(count):
            return True
        await page.reload()
        return False

    await until(counted, f"the definition page counts {count} open runs on {version.version}")


async def test_a_person_sees_open_runs_a_dry_run_and_then_the_move(
    console: Console,  # noqa: F811 - the fixture
    harness: Harness,
    browser: Browser,  # noqa: F811 - the fixture
) -> None:
    dsmo, agent = harness.dsmo, new_agent()
    v1 = await published(dsmo, V1, agent)
    v3 = await published(dsmo, V3, agent)
    run_id = await waiting_run(harness, v1)
    page = await new_page(browser)
    await console.sign_in(page, "person", then=f"/console/definitions/{agent}")
    await until_counted(page, v1, 1)
    await expect(page.locator(f'tr[data-version="{v3.workflow_version}"]')).to_contain_text("3.0.0 (latest)")
    await expect(page.locator(f'tr[data-version="{v3.workflow_version}"] td.count')).to_have_text("0")
    dry_run = page.locator(f'ul.dry-runs li[data-run="{run_id}"]')
    await expect(dry_run).to_contain_text("would move documents → documents, still waiting")
    await expect(page.get_by_role("note").last).to_contain_text("This page only checks moves")
    await expect(page.get_by_role("button", name="Migrate")).to_have_count(0)
    await console.shot(page, "definition-open-runs")
    await assert_labelled(page)

    await dsmo.migrate_run(run_id, v3, reason="a warmer welcome", by="ops")
    await waiting_on(dsmo, run_id, v3.workflow_version)
    await dry_run.get_by_role("link", name=run_id).click()
    moved = page.locator("p.migrated")
    await expect(moved).to_contain_text(f"1.0.0 {v1.workflow_version}")
    await expect(moved).to_contain_text(f"3.0.0 {v3.workflow_version}")
    entry = page.locator('li[data-type="RUN_MIGRATED"] p.migration')
    await expect(entry).to_contain_text("at documents to version 3.0.0")
    await expect(entry).to_contain_text("asked by ops: “a warmer welcome”")
    await console.shot(page, "run-migrated")
    await moved.locator("a.from-version").click()
    await expect(page.get_by_label("Version", exact=True)).to_have_value(v1.workflow_version)
    await dsmo.cancel(run_id, reason="test over")
