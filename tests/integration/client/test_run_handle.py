"""A run by its handle, and definitions through `client.definitions`: publish checks the workers
offer what a definition names; a run started by name is followed, answered and read by handle."""

from __future__ import annotations

import uuid

import pytest

from dsmo import ExecutionRequest, RunHandle, RunStatus, StartedRun, StartReport
from dsmo.client.definition_files import parse_definition_text
from dsmo.errors import NotOffered
from dsmo.workflows.common import search_attributes as sa
from tests.conftest import Harness
from tests.polling import until_value

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

    # The worker the harness started polls a moment after it starts: until Temporal lists it as a
    # poller nobody can check an offer (and publishing says so). Wait for that, not for a time.
    await until_value(
        lambda: client.definitions.catalog(queue), lambda found: found is not None, f"a poller listed on {queue}"
    )
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


async def test_start_returns_the_run_s_handle_and_the_older_start_names_still_work_with_a_warning(
    harness: Harness,
) -> None:
    client, queue = harness.dsmo, harness.task_queue
    definition = parse_definition_text(FLOW.format(agent=f"handle-{uuid.uuid4().hex[:8]}"))
    run = await client.start(definition, {"name": "Ana"}, task_queue=queue)
    harness.started.append(run.run_id)
    assert isinstance(run, StartedRun) and run.started.status == "running" and run.started.run_id == run.run_id
    assert (await run.wait_for_status({RunStatus.WAITING}, timeout=60)).waiting_for == "response"
    described = await run.describe()  # Temporal's own description, through the handle
    assert described.id == run.run_id and described.typed_search_attributes.get(sa.AGENT_NAME) == definition.agent

    request = ExecutionRequest(definition=definition, input={"name": "Eva"})
    with pytest.raises(ValueError, match=r"^input: a complete request carries it"):
        await client.start(request, {"name": "other"}, task_queue=queue)
    with pytest.warns(DeprecationWarning, match=r"DsmoClient\.submit is deprecated"):
        report = await client.submit(definition, {"name": "Bo"}, task_queue=queue)
    with pytest.warns(DeprecationWarning, match=r"DsmoClient\.start_request is deprecated"):
        requested = await client.start_request(request, task_queue=queue)
    with pytest.warns(DeprecationWarning, match=r"DsmoClient\.submit_request is deprecated"):
        submitted = await client.submit_request(request, task_queue=queue)
    harness.started.extend([report.run_id, requested, submitted.run_id])
    assert isinstance(report, StartReport) and report.status == "running"
    assert isinstance(requested, str) and submitted.run_id != requested
    for run_id in (run.run_id, report.run_id, requested, submitted.run_id):
        await client.run(run_id).wait_for_status({RunStatus.WAITING}, timeout=60)
        await client.run(run_id).cancel(reason="done")
        assert (await client.run(run_id).result()).status == RunStatus.CANCELLED
