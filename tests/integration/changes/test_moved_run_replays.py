"""A run moved to another version is forked, rewound and what-if'd against the version it is on now.

Version 2 renames the document wait (`documents` -> `papers`) and adds a message (`check`)
before the signature. A run moves from inside its document wait; from then on, its nodes are
judged by version 2, and its record from before the move is read through the node map.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from dsmo.client.definition_files import parse_definition_text
from dsmo.client.dsmo_client import DsmoClient
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import StatusView
from dsmo.workflows.definition.model import AgentDefinition
from tests.conftest import Harness
from tests.migration_versions import waiting_on
from tests.polling import until

pytestmark = pytest.mark.asyncio

V1 = """
agent: {agent}
version: "1.0.0"
start: documents
nodes:
  documents:
    actionType: request_document
    parameters: {{documents: [id_card, diploma], to: "ana@example.com", timeout: 7d, onTimeout: fail}}
    next: contract
  contract:
    actionType: request_signature
    parameters: {{document: "s3://contracts/ana.pdf", to: "ana@example.com", timeout: 7d, onTimeout: fail}}
    next: bye
  bye:
    actionType: send_message
    parameters: {{message: "Welcome, signed at {{{{signedAt}}}}"}}
"""

V2 = """
agent: {agent}
version: "2.0.0"
start: papers
nodes:
  papers:
    actionType: request_document
    parameters: {{documents: [id_card, diploma], to: "ana@example.com", timeout: 7d, onTimeout: fail}}
    next: check
  check:
    actionType: send_message
    parameters: {{message: "We are checking {{{{documentUrls[0]}}}}"}}
    next: contract
  contract:
    actionType: request_signature
    parameters: {{document: "s3://contracts/ana.pdf", to: "ana@example.com", timeout: 7d, onTimeout: fail}}
    next: bye
  bye:
    actionType: send_message
    parameters: {{message: "Welcome {{{{ priority }}}}, signed at {{{{signedAt}}}}"}}
"""


async def _versions(dsmo: DsmoClient) -> tuple[AgentDefinition, AgentDefinition]:
    agent = f"moved-{uuid.uuid4().hex[:8]}"
    v1, v2 = (parse_definition_text(text.format(agent=agent)) for text in (V1, V2))
    await dsmo.publish(v1)
    await dsmo.publish(v2)
    return v1, v2


async def _moved_and_waiting_to_sign(harness: Harness, v1: AgentDefinition, v2: AgentDefinition) -> str:
    """A run that took one document on v1, moved inside its wait, took the other on v2 and waits to sign."""
    dsmo = harness.dsmo
    run_id = await harness.start(v1, {"candidate": "ana"})
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    data = {"document": "id_card", "url": "s3://uploads/id_card.pdf"}
    await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", data, event_id=f"{run_id}-id")
    await dsmo.migrate_run(run_id, v2, node_map={"documents": "papers"}, set_variables={"priority": "high"})
    await waiting_on(dsmo, run_id, v2.workflow_version)
    data = {"document": "diploma", "url": "s3://uploads/diploma.pdf"}
    await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", data, event_id=f"{run_id}-diploma")
    waiting = await _waiting_at(dsmo, run_id, "contract")
    assert waiting.path == ["documents", "check", "contract"]
    return run_id


async def _waiting_at(dsmo: DsmoClient, run_id: str, node: str) -> StatusView:
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        view = await dsmo.status(run_id)
        if view.status is RunStatus.WAITING and view.current_node == node:
            return view
        assert asyncio.get_running_loop().time() < deadline, f"{run_id} never waited at {node}: {view}"
        await asyncio.sleep(0.05)


async def test_a_moved_run_forks_from_a_node_of_its_new_version_and_not_from_one_the_move_renamed(
    harness: Harness,
) -> None:
    dsmo = harness.dsmo
    v1, v2 = await _versions(dsmo)
    run_id = await _moved_and_waiting_to_sign(harness, v1, v2)

    fork_id = await dsmo.fork(run_id, "check", task_queue=harness.task_queue)
    harness.started.append(fork_id)
    forked = await _waiting_at(dsmo, fork_id, "contract")
    assert forked.path == ["documents", "check", "contract"]
    trail = await dsmo.events(fork_id)
    [moved] = [e for e in trail if e.type == "RUN_MIGRATED"]
    assert moved.data["toVersion"] == "2.0.0"
    [live] = [e for e in trail if e.type == "RUN_FORKED"]
    assert live.stage == "check"
    assert [m["message"] for m in harness.messages(fork_id) if m.get("message")] == [
        "We are checking s3://uploads/id_card.pdf"
    ]

    with pytest.raises(DsmoError) as refused:
        await dsmo.fork(run_id, "documents", task_queue=harness.task_queue)
    reason = str(refused.value)
    assert "'documents'" in reason and "1.0.0" in reason and "2.0.0" in reason and "'papers'" in reason, reason
    assert "\n" not in reason
    # The name it points at: the run entered it only under its old name, so the node after it.
    with pytest.raises(DsmoError, match=r"entered 'papers' only as 'documents'.*name the node after it"):
        await dsmo.fork(run_id, "papers", task_queue=harness.task_queue)


async def test_a_fork_from_before_the_move_goes_live_on_the_version_the_run_is_on_now(harness: Harness) -> None:
    dsmo = harness.dsmo
    v1, v2 = await _versions(dsmo)
    run_id = await harness.start(v1, {"candidate": "ana"})
    for name in ("id_card", "diploma"):  # both papers on version 1: it waits to sign there
        data = {"document": name, "url": f"s3://uploads/{name}.pdf"}
        await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", data, event_id=f"{run_id}-{name}")
    await _waiting_at(dsmo, run_id, "contract")
    await dsmo.migrate_run(run_id, v2, set_variables={"priority": "high"})
    await waiting_on(dsmo, run_id, v2.workflow_version)

    fork_id = await dsmo.fork(run_id, "contract", task_queue=harness.task_queue)
    harness.started.append(fork_id)
    forked = await _waiting_at(dsmo, fork_id, "contract")
    assert forked.workflow_version == v2.workflow_version
    trail = await dsmo.events(fork_id)
    [live] = [e for e in trail if e.type == "RUN_FORKED"]
    assert (live.stage, live.data["toVersion"]) == ("contract", "2.0.0")
    [moved] = [e for e in trail if e.type == "RUN_MIGRATED"]
    assert moved.data["toVersion"] == "2.0.0" and moved.data["set"] == {"priority": "high"}
    await dsmo.deliver_event(fork_id, "SIGNATURE_COMPLETED", {"signedDocumentUrl": "s3://s"}, event_id=f"{fork_id}-s")
    assert (await dsmo.result(fork_id)).status is RunStatus.COMPLETED
    said = [m["message"] for m in harness.messages(fork_id) if m.get("message")]
    assert len(said) == 1 and said[0].startswith("Welcome high, signed at"), said


async def test_a_moved_run_goes_back_to_a_node_of_its_new_version(harness: Harness) -> None:
    dsmo = harness.dsmo
    v1, v2 = await _versions(dsmo)
    run_id = await _moved_and_waiting_to_sign(harness, v1, v2)

    ack = await dsmo.rewind(run_id, "check", reason="check the papers again")
    assert (ack.from_node, ack.to_node) == ("contract", "check")
    back = await _waiting_at(dsmo, run_id, "contract")
    assert back.path[-2:] == ["check", "contract"]
    with pytest.raises(DsmoError) as refused:  # entered as `documents` on 1.0.0, before the move
        await dsmo.rewind(run_id, "documents", reason="again")
    reason = str(refused.value)
    assert "'documents'" in reason and "1.0.0" in reason and "2.0.0" in reason and "'papers'" in reason, reason

    await dsmo.deliver_event(
        run_id, "SIGNATURE_COMPLETED", {"signedDocumentUrl": "s3://signed/ana.pdf"}, event_id=f"{run_id}-sig"
    )
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert result.variables["priority"] == "high"  # what the move set is kept
    assert len(result.variables["documentUrls"]) == 2
    checks = [m for m in harness.messages(run_id) if str(m.get("message")).startswith("We are checking")]
    assert len(checks) == 2  # once on the way, once again after going back


async def test_what_if_replays_a_run_that_moved_to_a_renamed_wait(harness: Harness) -> None:
    dsmo = harness.dsmo
    v1, v2 = await _versions(dsmo)
    run_id = await _moved_and_waiting_to_sign(harness, v1, v2)
    await dsmo.deliver_event(
        run_id, "SIGNATURE_COMPLETED", {"signedDocumentUrl": "s3://signed/ana.pdf"}, event_id=f"{run_id}-sig"
    )
    assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
    query = f"AgentName = '{v2.agent}'"

    async def completed() -> bool:
        return (await dsmo.temporal.count_workflows(f"{query} AND ExecutionStatus = 'Completed'")).count >= 1

    await until(completed, "the moved run shows as completed")

    report = await dsmo.what_if(query, v2, task_queue=harness.task_queue)
    harness.started.extend(run.replay_id for run in report.runs)
    [replayed] = report.runs
    assert (replayed.problem, replayed.candidate_status) == (None, "completed"), (
        replayed,
        await dsmo.status(replayed.replay_id),
    )
    assert replayed.candidate_path == ["papers", "check", "contract", "bye"]
    assert report.summary()["errors"] == 0
    assert not harness.messages(replayed.replay_id)  # a what-if sends nothing
