"""A dry-run move names the kept events the move would expire, as the move itself then does."""

from __future__ import annotations

import uuid

import pytest

from dsmo.client.definition_files import parse_definition_text
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition
from tests.conftest import Harness
from tests.migration_versions import history_length, waiting_on

pytestmark = pytest.mark.integration

WAITS = """
agent: {agent}
version: "{version}"
start: documents
nodes:
  documents:
    actionType: request_document
    parameters: {{documents: [id_card, diploma], timeout: 7d, onTimeout: fail}}
    next: contract
  contract:
{contract}
    next: bye
  bye:
    actionType: send_message
    parameters: {{message: "Welcome"}}
"""
SIGN = """    actionType: request_signature
    parameters: {document: "s3://contracts/ana.pdf", timeout: 7d, onTimeout: fail}"""
TELL = """    actionType: send_message
    parameters: {message: "No contract to sign any more"}"""


async def _published(harness: Harness, agent: str, version: str, contract: str) -> AgentDefinition:
    definition = parse_definition_text(WAITS.format(agent=agent, version=version, contract=contract))
    await harness.dsmo.publish(definition)
    return definition


async def test_the_dry_run_names_the_kept_events_the_move_expires(harness: Harness) -> None:
    dsmo, agent = harness.dsmo, f"expiring-{uuid.uuid4().hex[:8]}"
    v1 = await _published(harness, agent, "1.0.0", SIGN)
    keeps = await _published(harness, agent, "1.1.0", SIGN)  # the signature wait stays ahead
    drops = await _published(harness, agent, "2.0.0", TELL)  # no signature wait ahead any more
    run_id = await harness.start(v1, {"candidate": "ana"})
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    id_card = {"document": "id_card", "url": "s3://uploads/id_card.pdf"}
    await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", id_card, event_id=f"{run_id}-id")
    signature = {"signedDocumentUrl": "s3://signed/ana.pdf"}
    early = await dsmo.deliver_event(run_id, "SIGNATURE_COMPLETED", signature, event_id=f"{run_id}-sig")
    assert early.accepted and early.buffered

    history = await history_length(dsmo, run_id)
    kept = await dsmo.migrate_run(run_id, keeps, dry_run=True)
    dry = await dsmo.migrate_run(run_id, drops, dry_run=True)
    assert kept.expiring == []
    assert dry.expiring == [f"{run_id}-sig"]
    assert await history_length(dsmo, run_id) == history  # the dry runs sent nothing to the run

    moved = await dsmo.migrate_run(run_id, drops, reason="no contract any more")
    assert moved.expiring == dry.expiring
    await waiting_on(dsmo, run_id, drops.workflow_version)
    expired = [e for e in await dsmo.events(run_id) if e.type == "EVENT_EXPIRED"]
    assert [e.data["eventId"] for e in expired] == dry.expiring
    assert (await dsmo.status(run_id)).inbox is None
