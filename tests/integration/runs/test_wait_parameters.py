"""A wait's parameters are rendered from the run's variables: the docs' inbox example, as written.

`docs/events.md` shows a `wait_for_response` whose `threadId` is a template and whose `match`
compares it with the reply's. The test takes that node from the page itself, so the page and the
behaviour cannot drift apart.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from dsmo.activities.definition_store import DefinitionStore
from dsmo.client.client_errors import EventNotAccepted
from dsmo.server.api_keys import KeyStore
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from dsmo.workflows.nodes.waits import RENDER_PATCH
from tests.conftest import Harness
from tests.ingress_server import serving
from tests.integration.runs.test_runs_under_older_checks import has_patch_marker, older_code, replays, takes_change

pytestmark = pytest.mark.asyncio
INPUT = re.compile(r"<input\b[^>]*>")

DOCS = Path(__file__).resolve().parents[3] / "docs" / "events.md"
CONVERSATION = {"conversation": {"thread": "T-42"}, "meeting": {"title": "Entrevista con Ana"}}


def docs_example() -> dict[str, Any]:
    """The YAML block under "Matching" in docs/events.md, as the page shows it."""
    section = DOCS.read_text().split("## Matching", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert block is not None, "docs/events.md lost its matching example"
    nodes = yaml.safe_load(block.group(1))
    assert nodes["wait_reply"]["parameters"]["threadId"] == "{{conversation.thread}}"
    return dict(nodes)


def inbox_chat() -> AgentDefinition:
    nodes = docs_example()
    (first,) = nodes
    nodes[first]["next"] = "meeting"
    nodes["meeting"] = {
        "actionType": "wait_for_event",
        "parameters": {"event": "interview", "title": "{{meeting.title}}", "timeout": "1h"},
    }
    return parse_definition({"agent": "docs-inbox", "start": first, "nodes": nodes})


async def test_the_docs_inbox_example_takes_the_reply_on_its_thread(harness: Harness) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(inbox_chat(), CONVERSATION)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    view = await dsmo.status(run_id)
    assert view.waiting_data is not None
    assert view.waiting_data["threadId"] == "T-42" and view.waiting_data["expectedFrom"] == "postulant"

    with pytest.raises(EventNotAccepted, match="does not match wait_reply's match"):
        await dsmo.deliver_event(
            run_id, "MESSAGE_RECEIVED", {"text": "otro hilo", "threadId": "T-7", "from": "postulant"}, event_id="m-1"
        )
    ack = await dsmo.deliver_event(
        run_id, "MESSAGE_RECEIVED", {"text": "sí", "threadId": "T-42", "from": "postulant"}, event_id="m-2"
    )
    assert ack.accepted and not ack.buffered

    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    view = await dsmo.status(run_id)
    assert view.waiting_for == "event" and view.waiting_data is not None
    assert view.waiting_data["title"] == "Entrevista con Ana"
    assert await takes_change(harness, run_id, RENDER_PATCH)
    await dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "done"}, event_id="cal-1")
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.variables["lastResponse"] == "sí"
    await replays(harness, run_id)


async def test_a_rendered_expected_sender_refuses_another_sender(harness: Harness) -> None:
    nodes = docs_example()
    nodes["wait_reply"]["parameters"]["expectedFrom"] = "{{candidate.phone}}"
    definition = parse_definition({"agent": "docs-inbox", "start": "wait_reply", "nodes": nodes})
    run_id = await harness.start(definition, {**CONVERSATION, "candidate": {"phone": "+34600111222"}})
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    with pytest.raises(EventNotAccepted, match=r"'\+34600999999' is not the sender wait_reply expects"):
        await harness.dsmo.deliver_event(
            run_id, "MESSAGE_RECEIVED", {"text": "yo", "threadId": "T-42", "from": "+34600999999"}, event_id="m-1"
        )
    await harness.dsmo.deliver_event(
        run_id, "MESSAGE_RECEIVED", {"text": "sí", "threadId": "T-42", "from": "+34600111222"}, event_id="m-2"
    )
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED


async def test_a_run_that_began_the_wait_before_rendering_keeps_it_as_written(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsmo = harness.dsmo
    with older_code(monkeypatch, refused=lambda change: change == RENDER_PATCH):
        old = await harness.start(inbox_chat(), CONVERSATION)
        await dsmo.wait_for_status(old, {RunStatus.WAITING})
        view = await dsmo.status(old)
        assert view.waiting_data is not None and view.waiting_data["threadId"] == "{{conversation.thread}}"
        await dsmo.deliver_event(
            old,
            "MESSAGE_RECEIVED",
            {"text": "sí", "threadId": "{{conversation.thread}}", "from": "postulant"},
            event_id="m-1",
        )
        await dsmo.wait_for_status(old, {RunStatus.WAITING})
        await dsmo.deliver_event(old, "EVENT_COMPLETED", {"result": "done"}, event_id="cal-1")
        assert (await dsmo.result(old)).status is RunStatus.COMPLETED
    assert not await has_patch_marker(harness, old, RENDER_PATCH)
    await replays(harness, old)


def form_values(page: str) -> dict[str, str]:
    """The named inputs of the run page's task form, with the values the page filled in."""
    form = page.split('class="task-form"', 1)[1].split("</form>", 1)[0]
    values = {}
    for tag in INPUT.findall(form):
        name, value = re.search(r'name="([^"]*)"', tag), re.search(r'value="([^"]*)"', tag)
        if name:
            values[html.unescape(name.group(1))] = html.unescape(value.group(1)) if value else ""
    return values


async def test_the_consoles_reply_form_completes_the_docs_inbox_example(harness: Harness, tmp_path: Path) -> None:
    # A person types only the reply; the wait's sender and thread come filled in from what it shows.
    definition = inbox_chat()
    DefinitionStore(harness.store).publish(definition)
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    key = KeyStore(settings.api_keys_path).add("replier", ["read", "events:MESSAGE_RECEIVED"])
    run_id = await harness.start(definition, CONVERSATION)
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    with serving(settings) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as browser:
            login = await browser.get("/console/login")
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', login.text)
            assert csrf is not None
            signed_in = await browser.post("/console/login", data={"api_key": key, "csrf_token": csrf.group(1)})
            assert signed_in.status_code == 303, signed_in.text
            page = await browser.get(f"/console/runs/{run_id}")
            assert page.status_code == 200, page.text
            values = form_values(page.text)
            assert values["threadId"] == "T-42" and values["from"] == "postulant"
            sent = await browser.post(f"/console/runs/{run_id}/events", data={**values, "text": "sí"})
            assert sent.status_code == 303, sent.text
    # The meeting's event is kept if the run has not reached its wait yet: no race to wait out.
    await harness.dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "done"}, event_id="cal-1")
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.variables["lastResponse"] == "sí"
