"""Two published versions of one agent and a run waiting on the first, for tests that move runs.

Version 2 renames the document node (`documents` -> `papers`), so a move needs the map
`documents:papers`, and its last message reads `priority`, which a run of version 1 does not
have (a move without `set: {priority: ...}` is refused naming it).
"""

from __future__ import annotations

import uuid

from dsmo.client.definition_files import parse_definition_text
from dsmo.client.dsmo_client import DsmoClient
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import StatusView
from dsmo.workflows.definition.model import AgentDefinition
from tests.conftest import Harness
from tests.polling import until_value

V1 = """
agent: {agent}
version: "1.0.0"
start: documents
nodes:
  documents:
    actionType: request_document
    parameters: {{documents: [id_card, diploma], to: "ana@example.com", timeout: 7d, onTimeout: fail}}
    next: bye
  bye:
    actionType: send_message
    parameters: {{message: "Welcome"}}
"""

V2 = """
agent: {agent}
version: "2.0.0"
start: papers
nodes:
  papers:
    actionType: request_document
    parameters: {{documents: [id_card, diploma], to: "ana@example.com", timeout: 7d, onTimeout: fail}}
    next: bye
  bye:
    actionType: send_message
    parameters: {{message: "Welcome {{{{ priority }}}}"}}
"""


def new_agent() -> str:
    """An agent name no other test uses."""
    return f"moving-{uuid.uuid4().hex[:8]}"


async def published(dsmo: DsmoClient, text: str, agent: str) -> AgentDefinition:
    """``text`` for ``agent``, published."""
    definition = parse_definition_text(text.format(agent=agent))
    await dsmo.publish(definition)
    return definition


async def waiting_run(harness: Harness, definition: AgentDefinition) -> str:
    """A run of ``definition`` waiting for its documents, one of two received."""
    run_id = await harness.start(definition, {"candidate": "ana"})
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    data = {"document": "id_card", "url": "s3://uploads/id_card.pdf"}
    await harness.dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", data, event_id=f"{run_id}-id")
    return run_id


async def waiting_on(dsmo: DsmoClient, run_id: str, workflow_version: str) -> StatusView:
    """The run's status once its generation on ``workflow_version`` waits (a move continues as new)."""
    return await until_value(
        lambda: dsmo.status(run_id),
        lambda view: view.workflow_version == workflow_version and view.status is RunStatus.WAITING,
        f"{run_id} waits on {workflow_version}",
    )


async def history_length(dsmo: DsmoClient, run_id: str) -> int:
    """How many events the run's current history holds."""
    return len((await dsmo.temporal.get_workflow_handle(run_id).fetch_history()).events)
