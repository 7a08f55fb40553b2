"""Sending a waiting run back to an earlier node from its page, as a person does it in a real browser.

The form is on the page of a waiting run for a key with `operate`; after it is sent, the page
says so, the run waits at the node again, and the trail reads the rewind as a sentence.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from dsmo.server.api_keys import KeyStore
from tests.conftest import Harness
from tests.ingress_server import serving
from tests.rewind_flow import waiting_for_signature
from tests.ui.test_console import CHROMIUM, Console, assert_labelled, browser, new_page, until_waiting  # noqa: F401

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make ui-check)"),
]


@pytest.fixture
def operator_console(harness: Harness, tmp_path: Path) -> Iterator[Console]:
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    keys = {"ops": KeyStore(settings.api_keys_path).add("ops", ["read", "operate"])}
    with serving(settings) as url:
        yield Console(url, keys, tmp_path, harness.store)


async def test_a_person_sends_a_waiting_run_back_to_the_document_step(
    operator_console: Console,
    harness: Harness,
    browser: Browser,  # noqa: F811 - the fixture
) -> None:
    run_id = await waiting_for_signature(harness)
    page = await new_page(browser)
    await operator_console.sign_in(page, "ops", then=f"/console/runs/{run_id}")
    await expect(page.get_by_role("heading", name="Waiting for signature")).to_be_visible()
    await page.get_by_text("Send back to an earlier node").click()
    await assert_labelled(page)
    node = page.get_by_label("Node", exact=True)
    await expect(node.locator("option")).to_have_text(["hello", "docs", "order"])
    await node.select_option("docs")
    await page.get_by_label("Corrections").fill("applicant=ana@right.example")
    await expect(page.get_by_label("Undo the saga steps done after the node (last first)")).to_be_checked()

    await page.get_by_role("button", name="Send back").click()  # no reason: refused, the form kept
    await expect(page.locator("#rewind-error")).to_have_text(
        "reason: say why the run goes back; it is recorded in the trail"
    )
    await expect(page.get_by_label("Corrections")).to_have_value("applicant=ana@right.example")
    await page.get_by_label("Reason").fill("wrong address")
    await page.get_by_role("button", name="Send back").click()

    await expect(page.get_by_role("status")).to_contain_text("Sent back")
    await until_waiting(page, "document")
    await expect(page.locator("p.rewound")).to_have_text("Sent back: from sign to docs")
    await expect(page.locator('li[data-type="RUN_REWOUND"] p.rewind')).to_contain_text(
        "Sent back from sign to docs, set applicant; undone: order; asked by console:ops: “wrong address”."
    )
