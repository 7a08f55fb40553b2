"""The console in a real browser: Playwright drives Debian's Chromium through `dsmo serve`.

The onboarding example is completed from the console alone (a reply, two real files uploaded
straight to the object store, a signature, a test, a meeting); keys, scopes, CSRF and escaping
are checked the way a browser meets them. Screenshots go to ``DSMO_UI_SCREENSHOTS`` (default
``.dsmo/ui-check/``); `make ui-check` runs this module.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Locator, Page, async_playwright, expect

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.audit_log import audit_key, verify_lines
from dsmo.activities.definition_store import DefinitionStore
from dsmo.client.definition_files import parse_definition_text
from dsmo.server.api_keys import KeyStore
from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness, definition_from
from tests.ingress_server import serving
from tests.polling import until, until_value

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make ui-check)"),
]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# Flags for this machine's closed network (see the ui-check notes): no background fetches.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
CANDIDATE = {"candidate": {"id": "c-7", "name": f"Ana {XSS}", "phone": "+34 600", "email": "ana@example.com"}}


@dataclass
class Console:
    url: str
    keys: dict[str, str]
    shots: Path
    store: ArtifactStore

    async def sign_in(self, page: Page, key: str, then: str = "/console/") -> None:
        await page.goto(self.url + then)
        await page.get_by_label("API key").fill(self.keys[key])
        await page.get_by_role("button", name="Sign in").click()

    async def shot(self, page: Page, name: str) -> None:
        await page.screenshot(path=str(self.shots / f"console-{name}.png"), full_page=True)


@pytest.fixture
def console(harness: Harness, tmp_path: Path) -> Iterator[Console]:
    definitions = DefinitionStore(harness.store)
    for name in ("onboarding", "background_check", "welcome_pack"):
        definitions.publish(definition_from(EXAMPLES / f"{name}.yaml"))
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    store = KeyStore(settings.api_keys_path)
    keys = {
        "person": store.add("person", ["read", "cancel", "events:*"]),
        "replier": store.add("replier", ["read", "events:MESSAGE_RECEIVED"]),
    }
    shots = Path(os.environ.get("DSMO_UI_SCREENSHOTS") or settings.state_dir / "ui-check")
    shots.mkdir(parents=True, exist_ok=True)
    with serving(settings) as url:
        yield Console(url, keys, shots, harness.store)


@pytest_asyncio.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield launched
        await launched.close()


async def new_page(browser: Browser) -> Page:
    context = await browser.new_context(viewport={"width": 1360, "height": 900})
    return await context.new_page()


async def assert_labelled(page: Page) -> None:
    """Every control a person can use has a label (screen readers read it, clicks on it focus it)."""
    unlabelled = await page.evaluate(
        """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
                 .filter(control => control.labels.length === 0).map(control => control.outerHTML)"""
    )
    assert unlabelled == [], unlabelled


async def until_waiting(page: Page, kind: str) -> None:
    """Reload the run page until it shows the wait for ``kind`` (the run moves on its own)."""
    await until(
        shown_after_reloads(page, page.get_by_role("heading", name=f"Waiting for {kind}")),
        f"the run page shows a wait for {kind}",
        seconds=120,
    )


def shown_after_reloads(page: Page, locator: Locator) -> Callable[[], Awaitable[bool]]:
    """A check that ``locator`` is on ``page``, reloading the page each time it is not."""

    async def shown() -> bool:
        if await locator.count():
            return True
        await page.reload()
        return False

    return shown


async def test_a_person_completes_the_onboarding_in_the_browser(  # noqa: PLR0915 - one story
    console: Console, harness: Harness, browser: Browser, tmp_path: Path
) -> None:
    run_id = await harness.start(definition_from(EXAMPLES / "onboarding.yaml"), CANDIDATE)
    page = await new_page(browser)
    await console.sign_in(page, "person")

    # The task list: the run is there, waiting for a response from the candidate.
    await page.get_by_label("Run id").fill(run_id)
    await page.get_by_role("button", name="Filter").click()
    row = page.locator(f'tr[data-run="{run_id}"]')
    await until(shown_after_reloads(page, row), f"the task list lists {run_id}", seconds=120)  # visibility lags
    await expect(row).to_contain_text("response")
    await expect(row).to_contain_text("candidate")
    await console.shot(page, "tasks")
    await assert_labelled(page)

    # A reply, from the keyboard.
    await row.get_by_role("link", name=run_id).click()
    await until_waiting(page, "response")
    await page.get_by_label("Reply").fill("Sí, empecemos")
    await console.shot(page, "reply")
    await assert_labelled(page)
    form = {
        name: await page.locator(f'form.task-form input[name="{name}"]').input_value()
        for name in ("csrf_token", "event_type", "event_id")
    }
    await page.get_by_label("Reply").press("Tab")
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("status")).to_contain_text("Delivered")
    # The same form sent again (a double submit) is a duplicate, not a second reply.
    again = await page.request.post(
        f"{console.url}/console/runs/{run_id}/events", form={**form, "text": "Sí, empecemos"}
    )
    assert "Already delivered" in await again.text()

    # Two real files, uploaded by the browser straight to the object store.
    await until_waiting(page, "document")
    id_card, diploma = tmp_path / "dni.pdf", tmp_path / "titulo.png"
    id_card.write_bytes(b"%PDF-1.4\n% a small but real file\n" + os.urandom(2048))
    diploma.write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(4096))
    await console.shot(page, "documents")
    await assert_labelled(page)
    for name, path in (("id_card", id_card), ("diploma", diploma)):
        await page.get_by_label(name).set_input_files(str(path))
        await page.get_by_role("button", name=f"Upload {name}").click()
        await expect(page.get_by_role("status")).to_contain_text("Delivered")

    await until_waiting(page, "signature")
    await expect(page.get_by_label("Signed document URL")).to_have_value(re.compile(r"contracts/c-7\.pdf$"))
    await console.shot(page, "signature")
    await assert_labelled(page)
    await page.get_by_role("button", name="Mark as signed").click()
    await expect(page.get_by_role("status")).to_contain_text("Delivered")

    # A test result: a wrong score is shown next to its field, then corrected.
    await until_waiting(page, "test")
    await page.get_by_label("Score").fill("eighty")
    await page.get_by_label("Result", exact=True).fill("passed")
    await page.get_by_role("button", name="Record result").click()
    await expect(page.locator("#f-score-error")).to_contain_text("must be a number")
    await console.shot(page, "test")
    await assert_labelled(page)
    await page.get_by_label("Score").fill("87")
    await page.get_by_role("button", name="Record result").click()
    await expect(page.get_by_role("status")).to_contain_text("Delivered")

    await until_waiting(page, "event")
    await page.get_by_label("Notes").fill("Entrevista con el equipo")
    await console.shot(page, "event")
    await assert_labelled(page)
    await page.get_by_role("button", name="Mark as completed").click()
    await expect(page.get_by_role("status")).to_contain_text("Delivered")

    # The background check is a child run waiting for the verifier: reached from the parent's page.
    await until_waiting(page, "agent")
    await page.locator("#children-heading + ul a").click()
    await until_waiting(page, "response")
    await expect(page.get_by_text("Started by")).to_be_visible()
    await page.get_by_label("Reply").fill("Sin antecedentes")
    await page.get_by_role("button", name="Send reply").click()
    await expect(page.get_by_role("status")).to_contain_text("Delivered")
    await page.get_by_role("link", name=run_id).click()

    view = await harness.dsmo.wait_for_status(run_id, {RunStatus.COMPLETED}, timeout=120)
    assert view.status is RunStatus.COMPLETED
    variables = await harness.dsmo.variables(run_id)
    assert variables["testScore"] == 87 and variables["testResult"] == "passed"
    assert sorted(url.rsplit("/", 1)[-1] for url in variables["documentUrls"]) == ["dni.pdf", "titulo.png"]
    uploaded = harness.store.read_bytes(variables["documentUrls"][0])
    assert uploaded in (id_card.read_bytes(), diploma.read_bytes())

    # The finished run's page: the path drawn, the trail listed, nothing from the name executed.
    await page.reload()
    await expect(page.locator("[data-status]")).to_have_text("completed")
    visited = page.locator("svg.dsmo-graph g.node.visited")
    assert await visited.count() == len(set(view.path)) >= 10
    await expect(page.locator('.timeline li[data-type="RUN_COMPLETED"]')).to_have_count(1)
    await expect(page.locator("pre.json").first).to_contain_text("<script>window.__xss=2</script>")
    assert await page.evaluate("window.__xss") is None
    assert await page.locator("main img, main script").count() == 0
    await console.shot(page, "run")
    web_ui = await page.get_by_role("link", name="Open in the Temporal Web UI").get_attribute("href")
    assert web_ui and web_ui.endswith(f"/workflows/{run_id}")
    output = page.get_by_role("link", name="output.json")
    downloaded = await page.request.get(await output.get_attribute("href") or "")
    assert downloaded.ok and await downloaded.json() == harness.store.read_json(
        await output.get_attribute("title") or ""
    )

    trail = [event.model_dump(mode="json") for event in await harness.dsmo.events(run_id)]

    async def exported() -> bytes:  # the export is the run's last activity
        try:
            return harness.store.read_bytes(harness.store.uri(audit_key(run_id)))
        except Exception:  # noqa: BLE001 - not written yet
            return b""

    body = await until_value(exported, bool, f"the audit trail of {run_id} exported", seconds=120)
    assert verify_lines(body, trail).ok


async def test_keys_scopes_and_csrf_are_enforced(console: Console, harness: Harness, browser: Browser) -> None:
    page = await new_page(browser)
    # No session: the console sends the person to sign in; a wrong key is refused there.
    await page.goto(f"{console.url}/")
    await expect(page).to_have_url(re.compile(r"/console/login\?next=/console/$"))
    await page.get_by_label("API key").fill("dsmo_not-a-key")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator("#api_key-error")).to_have_text("unknown API key")
    assert (await page.request.get(f"{console.url}/console/definitions", max_redirects=0)).status == 303

    # A key scoped to replies sees a document request but cannot upload.
    run_id = await harness.start(definition_from(EXAMPLES / "onboarding.yaml"), CANDIDATE)
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    # A signature that arrives early is kept in the run's inbox, and the run page says so.
    early = {"signedDocumentUrl": "s3://docs/early.pdf"}
    await harness.dsmo.deliver_event(run_id, "SIGNATURE_COMPLETED", early, event_id="early-sign")
    await harness.dsmo.respond(run_id, "hola")
    await console.sign_in(page, "replier", then=f"/console/runs/{run_id}")
    await until_waiting(page, "document")
    await expect(page.get_by_role("alert")).to_contain_text("lacks the scope events:DOCUMENT_UPLOADED")
    await expect(page.locator("#inbox-heading + p")).to_contain_text(
        "1 event kept for a wait ahead (SIGNATURE_COMPLETED 1)"
    )
    assert await page.locator("form.upload").count() == 0
    forged = await page.request.get(f"{console.url}/console/runs/{run_id}/uploaded/id_card/console-x/abc?key=k")
    assert forged.status == 403 and "lacks the scope" in await forged.text()
    await page.goto(f"{console.url}/")  # signed in, / opens the task list
    await expect(page.get_by_role("heading", name="Tasks")).to_be_visible()

    # A form without its CSRF token is refused, and nothing reaches the run.
    posted = await page.request.post(
        f"{console.url}/console/runs/{run_id}/events",
        form={"event_type": "MESSAGE_RECEIVED", "event_id": "console-no-token", "text": "forged"},
    )
    assert posted.status == 403 and "csrf_token" in await posted.text()
    trail = await harness.dsmo.events(run_id)
    assert not any(event.data.get("eventId") == "console-no-token" for event in trail)

    # The API itself still wants its key header: a console session is not an API credential.
    assert (await page.request.get(f"{console.url}/executions/{run_id}")).status == 401

    # A key with `cancel` cancels from the run page, with a reason the audit trail keeps.
    await page.get_by_role("button", name="Sign out").click()
    await console.sign_in(page, "person", then=f"/console/runs/{run_id}")
    await page.get_by_text("Cancel this run").click()
    await page.get_by_role("button", name="Cancel run").click()  # the browser asks for the reason first
    assert await page.get_by_label("Reason").evaluate("field => field.validity.valueMissing")
    token = await page.locator('form.cancel input[name="csrf_token"]').input_value()
    blank = await page.request.post(f"{console.url}/console/runs/{run_id}/cancel", form={"csrf_token": token})
    assert blank.status == 422 and "give a reason" in await blank.text()
    await page.get_by_label("Reason").fill("candidate withdrew")
    await page.get_by_role("button", name="Cancel run").click()
    await expect(page.get_by_role("status")).to_contain_text("Cancel requested")
    view = await harness.dsmo.wait_for_status(run_id, {RunStatus.CANCELLED})
    assert view.cancel_reason == "candidate withdrew" and view.cancelled_by == "console:person"


async def test_definitions_are_drawn_and_two_versions_compared(console: Console, browser: Browser) -> None:
    text = (EXAMPLES / "onboarding.yaml").read_text()
    changed = text.replace('version: "1.0.0"', 'version: "1.1.0"').replace(
        "    next: cooldown\n",
        "    next: feedback\n  feedback:\n    actionType: send_message\n"
        '    parameters: {to: "{{candidate.phone}}", message: "¿Qué tal la entrevista?"}\n    next: cooldown\n',
    )
    older = definition_from(EXAMPLES / "onboarding.yaml")
    newer = parse_definition_text(changed)
    DefinitionStore(console.store).publish(newer)
    page = await new_page(browser)
    await console.sign_in(page, "person", then="/console/definitions")
    await page.get_by_role("link", name="employee-onboarding").click()
    await expect(page.locator("svg.dsmo-graph g.node")).to_have_count(len(newer.nodes))
    await page.get_by_label("Compare with").select_option(older.workflow_version)
    await page.get_by_role("button", name="Show").click()
    await expect(page.locator(".changes .added").first).to_contain_text("node added feedback")
    await expect(page.locator('svg.dsmo-graph g.node.added[data-node="feedback"]')).to_have_count(1)
    await expect(page.locator("svg.dsmo-graph polyline.edge.removed")).to_have_count(1)
    await console.shot(page, "definition-diff")
    await assert_labelled(page)
