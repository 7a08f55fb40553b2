"""A run waiting for a signature after a document and an order, for tests that send runs back.

The order (`create-order`, the harness's order actions) is a saga step done after the document
step, so sending the run back to `docs` undoes it (or leaves it, recorded).
"""

from __future__ import annotations

import uuid

from dsmo.client.definition_files import parse_definition_text
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import StatusView
from tests.conftest import Harness
from tests.polling import until_value

FLOW = """
agent: {agent}
version: "1"
inputs: [applicant]
start: hello
nodes:
  hello:
    actionType: send_message
    parameters: {{message: "hello", to: "{{{{applicant}}}}"}}
    next: docs
  docs:
    actionType: request_document
    parameters: {{documents: [id], to: "{{{{applicant}}}}", timeout: 1h, onTimeout: fail}}
    next: order
  order:
    actionType: invoke
    action: create-order
    input: {{customer: "{{{{applicant}}}}", productId: lamp, quantity: 1, amount: 10}}
    compensate: {{kind: annulment}}
    next: sign
  sign:
    actionType: request_signature
    parameters: {{document: "https://example.com/c.pdf", to: "{{{{applicant}}}}", timeout: 1h, onTimeout: fail}}
    next: done
  done:
    actionType: send_message
    parameters: {{message: "signed", to: "{{{{applicant}}}}"}}
"""


async def waiting_at(harness: Harness, run_id: str, node: str) -> StatusView:
    """The run's status once it waits at ``node`` (a rewind continues as new first)."""
    return await until_value(
        lambda: harness.dsmo.status(run_id),
        lambda view: view.status is RunStatus.WAITING and view.current_node == node,
        f"{run_id} waits at {node}",
    )


async def waiting_for_signature(harness: Harness) -> str:
    """A new run of the flow (a fresh agent) past its document and its order, waiting at `sign`."""
    definition = parse_definition_text(FLOW.format(agent=f"rewind-{uuid.uuid4().hex[:8]}"))
    run_id = await harness.start(definition, {"applicant": "wrong@example.com"})
    await waiting_at(harness, run_id, "docs")
    url = harness.store.put_json_once(f"uploads/{uuid.uuid4().hex[:8]}/id.json", {"name": "Ana"}).uri
    await harness.dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", {"document": "id", "url": url})
    await waiting_at(harness, run_id, "sign")
    return run_id
