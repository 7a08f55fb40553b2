"""A run by its handle, and definitions through `client.definitions`: publish checks the workers
offer what a definition names; a run started by name is followed, answered and read by handle."""

from __future__ import annotations

import uuid

import pytest

from dsmo import RunHandle, RunStatus
from dsmo.client.definition_files import parse_definition_text
from dsmo.errors import NotOffered
from tests.conftest import Harness

pytestmark = pytest.mark.integration

FLOW = """
agent: {agent}
inputs: [name]
start: hello
nodes:
  hello:
    actionType: send_message
    parameters: {{to: "{{{{name}}}}", message: "Hello"}}
    next: reply
  reply:
    actionType: wait_for_response
    parameters: {{timeout: 1h}}
"""
NAMES_AN_ACTION = """
agent: {agent}
start: charge
nodes:
  charge:
    actionType: invoke
    action: {action}
"""


async def test_publish_checks_the_offer_and_a_run_is_followed_by_its_handle(harness: Harness) -> None:
    client, queue = harness.dsmo, harness.task_queue
    agent = f"handle-{uuid.uuid4().hex[:8]}"
    published = await client.definitions.publish(parse_definition_text(FLOW.format(agent=agent)), task_queue=queue)
    assert published.unchecked == "" and published.uri.endswith(f"{published.workflow_version}.json")
    assert await client.definitions.versions(agent) == [published.workflow_version]
    assert [row.agent for row in await client.definitions() if row.agent == agent] == [agent]

    unknown = parse_definition_text(NAMES_AN_ACTION.format(agent=f"{agent}-x", action="never-registered"))
    with pytest.raises(NotOffered, match=f"^no worker on {queue} offers action never-registered"):
        await client.definitions.publish(unknown, task_queue=queue)
    assert [row for row in await client.definitions() if row.agent == f"{agent}-x"] == []  # nothing published
    idle = f"idle-{uuid.uuid4().hex[:6]}"
    unchecked = await client.definitions.publish(unknown, task_queue=idle)
    assert unchecked.unchecked.startswith(f"no worker polls {idle}"), unchecked

    run = client.run(await harness.start(await client.definitions.get(agent), {"name": "Ana"}))
    assert isinstance(run, RunHandle)
    assert (await run.wait_for_status({RunStatus.WAITING}, timeout=60)).waiting_for == "response"
    ack = await run.respond("yes", event_id="reply-1")
    assert ack.accepted
    assert (await run.result()).status == RunStatus.COMPLETED
    types = [event.type for event in await run.events()]
    assert types[0] == "RUN_CREATED" and types[-1] == "RUN_COMPLETED", types
    page = await run.events_page(limit=2)
    assert [event.type for event in page.events] == types[-2:]
    assert (await run.status()).status == RunStatus.COMPLETED
