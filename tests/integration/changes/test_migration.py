"""Moving runs to another version on the real stack: nothing received is lost, refusals write nothing.

A run waiting for documents (two of three in, a signature that arrived early kept in its
inbox) moves to a version that renames the document node and adds a step before the
signature, then completes there. Each refusal reason leaves the run's history and trail as
they were.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dsmo.client.client_errors import AlreadyOnTarget, DefinitionNotFound, MigrationNotAccepted
from dsmo.client.definition_files import parse_definition_text
from dsmo.client.dsmo_client import DsmoClient
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition
from dsmo_examples.orders.db import OrderDatabase, shipments
from tests.conftest import Harness
from tests.migration_versions import history_length, waiting_on
from tests.polling import until

pytestmark = pytest.mark.asyncio

BIN = Path(sys.executable).parent

V1 = """
agent: {agent}
version: "1.0.0"
start: documents
nodes:
  documents:
    actionType: request_document
    parameters: {{documents: [id_card, diploma, payslip], to: "ana@example.com", timeout: 7d, onTimeout: fail}}
    next: contract
  contract:
    actionType: request_signature
    parameters: {{document: "s3://contracts/ana.pdf", to: "ana@example.com", timeout: 7d, onTimeout: fail}}
    next: bye
  bye:
    actionType: send_message
    parameters: {{message: "Welcome, signed at {{{{signedAt}}}}"}}
"""

# Version 2 renames `documents` to `papers` and checks the papers before the signature.
V2 = """
agent: {agent}
version: "2.0.0"
start: papers
nodes:
  papers:
    actionType: request_document
    parameters: {{documents: [id_card, diploma, payslip], to: "ana@example.com", timeout: 7d, onTimeout: fail}}
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


def _agent() -> str:
    return f"migrate-{uuid.uuid4().hex[:8]}"


async def _published(dsmo: DsmoClient, text: str, agent: str, **changes: str) -> AgentDefinition:
    definition = parse_definition_text(text.format(agent=agent, **changes))
    await dsmo.publish(definition)
    return definition


async def _waiting_for_documents(harness: Harness, v1: AgentDefinition) -> str:
    dsmo = harness.dsmo
    run_id = await harness.start(v1, {"candidate": "ana"})
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    for name in ("id_card", "diploma"):
        data = {"document": name, "url": f"s3://uploads/{name}.pdf"}
        await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", data, event_id=f"{run_id}-{name}")
    # The signature arrives before it was asked for: kept for the signature wait ahead.
    ack = await dsmo.deliver_event(
        run_id, "SIGNATURE_COMPLETED", {"signedDocumentUrl": "s3://signed/ana.pdf"}, event_id=f"{run_id}-sig"
    )
    assert ack.accepted and "kept" in (ack.detail or "")
    return run_id


async def test_a_waiting_run_moves_with_everything_it_received_and_completes_on_the_new_version(
    harness: Harness,
) -> None:
    dsmo, agent = harness.dsmo, _agent()
    v1 = await _published(dsmo, V1, agent)
    v2 = await _published(dsmo, V2, agent)
    run_id = await _waiting_for_documents(harness, v1)
    before = await dsmo.status(run_id)
    assert before.waiting_data and before.waiting_data["received"] == ["diploma", "id_card"]

    ack = await dsmo.migrate_run(
        run_id, v2, node_map={"documents": "papers"}, set_variables={"priority": "high"}, reason="fix", by="ops"
    )
    assert (ack.from_node, ack.to_node, ack.waiting) == ("documents", "papers", True)
    assert (ack.from_workflow_version, ack.to_workflow_version) == (v1.workflow_version, v2.workflow_version)

    moved = await waiting_on(dsmo, run_id, v2.workflow_version)
    assert (moved.status, moved.current_node, moved.waiting_for) == (RunStatus.WAITING, "papers", "document")
    assert moved.waiting_until == before.waiting_until  # the deadline is kept
    assert moved.waiting_data and moved.waiting_data["received"] == ["diploma", "id_card"]
    assert moved.inbox and moved.inbox.count == 1  # the early signature is still kept
    described = await dsmo.temporal.get_workflow_handle(run_id).describe()
    assert described.typed_search_attributes.get(sa.WORKFLOW_VERSION) == v2.workflow_version

    data = {"document": "payslip", "url": "s3://uploads/payslip.pdf"}
    await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", data, event_id=f"{run_id}-payslip")
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert result.path == ["documents", "check", "contract", "bye"]  # entered `documents`, left it as `papers`
    assert len(result.variables["documentUrls"]) == 3
    assert result.variables["signedDocumentUrl"] == "s3://signed/ana.pdf"
    assert result.variables["priority"] == "high"

    trail = await dsmo.events(run_id)
    [migrated] = [event for event in trail if event.type == "RUN_MIGRATED"]
    assert migrated.data["fromVersion"] == "1.0.0" and migrated.data["toVersion"] == "2.0.0"
    assert migrated.data["nodeMap"] == {"documents": "papers"}
    assert (migrated.data["requestedBy"], migrated.data["reason"], migrated.data["set"]) == (
        "ops",
        "fix",
        {"priority": "high"},
    )
    assert migrated.workflow_version == v2.workflow_version
    consumed = [event for event in trail if event.type == "EVENT_CONSUMED"]
    assert [event.data["eventId"] for event in consumed] == [f"{run_id}-sig"]
    assert [event.seq for event in trail] == list(range(1, len(trail) + 1))  # one chain across the move
    assert (await dsmo.verify_trail(run_id)).ok
    assert await dsmo.verify_history(run_id) is None
    # A replay starts on version 1 and moves where the original moved, then takes the same path.
    report = await dsmo.replay(run_id, task_queue=harness.task_queue)
    assert (report.replay_status, report.replay_path, report.same_path) == ("completed", result.path, True)
    replayed = await dsmo.events(report.replay)
    assert [e.data["toVersion"] for e in replayed if e.type == "RUN_MIGRATED"] == ["2.0.0"]


async def test_a_move_that_restarts_timers_waits_the_target_wait_s_whole_timeout(harness: Harness) -> None:
    dsmo, agent = harness.dsmo, _agent()
    v1 = await _published(dsmo, V1, agent)
    # Version 3: the documents wait times out after 2 days instead of 7.
    v3 = await _published(dsmo, V2.replace("2.0.0", "3.0.0").replace("timeout: 7d", "timeout: 2d", 1), agent)
    run_id = await _waiting_for_documents(harness, v1)
    before = await dsmo.status(run_id)
    await dsmo.migrate_run(
        run_id, v3, node_map={"documents": "papers"}, set_variables={"priority": "low"}, restart_timers=True
    )
    moved = await waiting_on(dsmo, run_id, v3.workflow_version)
    assert moved.waiting_until is not None and before.waiting_until is not None
    assert moved.waiting_data and moved.waiting_data["received"] == ["diploma", "id_card"]
    assert moved.waiting_data["timeout"] == "2d"
    # The deadline is two days from the move (read from the trail), not the old 7 days nor now.
    [migrated] = [event for event in await dsmo.events(run_id) if event.type == "RUN_MIGRATED"]
    assert migrated.data["restartTimers"] is True
    assert abs((moved.waiting_until - migrated.at) - timedelta(days=2)) < timedelta(seconds=10)
    data = {"document": "payslip", "url": "s3://uploads/payslip.pdf"}
    await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", data, event_id=f"{run_id}-payslip")
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.path == ["documents", "check", "contract", "bye"]


async def test_each_refusal_names_its_reason_and_writes_nothing(harness: Harness) -> None:
    dsmo, agent = harness.dsmo, _agent()
    v1 = await _published(dsmo, V1, agent)
    v2 = await _published(dsmo, V2, agent)
    other = await _published(dsmo, V1, _agent())
    unpublished = parse_definition_text(V2.format(agent=agent).replace('"2.0.0"', '"2.0.1"'))
    run_id = await _waiting_for_documents(harness, v1)
    history, trail = await history_length(dsmo, run_id), len(await dsmo.events(run_id))

    async def refused(to: AgentDefinition, **options: Any) -> str:
        with pytest.raises((MigrationNotAccepted, DefinitionNotFound)) as err:
            await dsmo.migrate_run(run_id, to, **options)
        return str(err.value)

    both: dict[str, Any] = {"node_map": {"documents": "papers"}, "set_variables": {"priority": "high"}}
    assert "'documents' has no counterpart in version 2.0.0" in await refused(v2, set_variables={"priority": "x"})
    assert "waits for document at 'documents'; 'contract' in version 2.0.0 waits for signature" in await refused(
        v2, node_map={"documents": "contract"}, set_variables={"priority": "x"}
    )
    assert "variables: version 2.0.0 reads 'priority'" in await refused(v2, node_map={"documents": "papers"})
    assert f"is not the run's agent {agent!r}" in await refused(other)
    assert "is not published" in await refused(unpublished, **both)
    assert "map nowhere:papers: version 1.0.0 has no node 'nowhere'" in await refused(
        v2, node_map={"nowhere": "papers"}, set_variables={"priority": "x"}
    )
    with pytest.raises(AlreadyOnTarget):
        await dsmo.migrate_run(run_id, v1)
    assert await history_length(dsmo, run_id) == history
    assert len(await dsmo.events(run_id)) == trail
    assert (await dsmo.status(run_id)).workflow_version == v1.workflow_version

    # A dry run says what the move would do, and moves nothing.
    preview = await dsmo.migrate_run(run_id, v2, dry_run=True, **both)
    assert (preview.to_node, preview.waiting) == ("papers", True)
    assert await history_length(dsmo, run_id) == history
    await dsmo.cancel(run_id, reason="test over")


SAGA = """
agent: {agent}
version: "{version}"
inputs: [order]
start: create_order
nodes:
  create_order:
    actionType: invoke
    action: create-order
    input: {{customer: "{{{{order.customer}}}}", productId: lamp, quantity: 1, amount: 49.5}}
    compensate: {{kind: annulment, when: 'output.status == "pending"'}}
    next: reserve_stock
  reserve_stock:
    actionType: invoke
    action: reserve-stock
    input: {{orderId: "{{{{steps.create_order.orderId}}}}", productId: lamp, quantity: 1}}
    compensate: {{kind: annulment, when: 'output.status == "active"'}}
    next: approval
  approval:
    actionType: wait_for_event
    parameters: {{event: approval, timeout: 7d, onTimeout: fail}}
    next: {after_approval}
{extra}
  process_payment:
    actionType: invoke
    action: process-payment
    input: {{orderId: "{{{{steps.create_order.orderId}}}}", amount: 49.5, card: "4242 4242 4242 4242"}}
    compensate: {{kind: reversal}}
    next: create_shipment
  create_shipment:
    actionType: invoke
    action: create-shipment
    input: {{orderId: "{{{{steps.create_order.orderId}}}}", address: "{{{{order.address}}}}"}}
    compensate: {{kind: counter_operation}}
"""

NOTIFY = """  notify:
    actionType: send_message
    parameters: {message: "paying now"}
    next: process_payment"""


async def test_a_saga_moved_midway_compensates_steps_from_both_versions_lifo(
    harness: Harness, order_db: OrderDatabase
) -> None:
    dsmo, agent = harness.dsmo, _agent()
    v1 = await _published(dsmo, SAGA, agent, version="1", after_approval="process_payment", extra="")
    v2 = await _published(dsmo, SAGA, agent, version="2", after_approval="notify", extra=NOTIFY)
    # The address no carrier delivers to: the shipment, after the move, fails.
    run_id = await harness.start(v1, {"order": {"customer": "ana", "address": "nowhere"}})
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.migrate_run(run_id, v2, reason="notify before paying")
    await waiting_on(dsmo, run_id, v2.workflow_version)
    await dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "approved"}, event_id=f"{run_id}-ok")
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.FAILED and result.failed_action_id == "create_shipment"
    assert result.compensation is not None
    # Payment was done on version 2, the other two on version 1: undone last-in, first-out.
    assert result.compensation["compensated"] == ["process_payment", "reserve_stock", "create_order"]
    assert order_db.effects(run_id)[-3:] == ["refund_payment", "release_stock", "cancel_order"]
    assert order_db.stock("lamp") == (10, 0)
    assert order_db.row(shipments, run_id) is None
    events = await dsmo.events(run_id)
    done = {e.stage: e.workflow_version for e in events if e.type == "STAGE_SUCCEEDED" and e.stage}
    assert (done["reserve_stock"], done["process_payment"]) == (v1.workflow_version, v2.workflow_version)


async def dsmo_cli(harness: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [str(BIN / "dsmo"), *args], capture_output=True, text=True, env=harness.cli_env(), timeout=180
    )


async def test_the_waiting_runs_move_through_dsmo_runs_migrate_and_a_rerun_moves_nothing(
    harness: Harness, tmp_path: Path
) -> None:
    dsmo, agent = harness.dsmo, _agent()
    v1 = await _published(dsmo, V1, agent)
    v2_file = tmp_path / "v2.yaml"
    v2_file.write_text(V2.format(agent=agent))
    runs = [await _waiting_for_documents(harness, v1) for _ in range(3)]
    await _visible(dsmo, f"AgentName = '{agent}' AND WorkflowVersion = '{v1.workflow_version}'", 3)
    move = ["runs", "migrate", agent, "--from", "1.0.0", "--to", str(v2_file), "--map", "documents:papers"]
    move += ["--set", "priority=high", "--reason", "rename the document step", "--by", "ops", "--json"]

    dry = await dsmo_cli(harness, *move, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert report["summary"]["would"] == 3 and report["dryRun"] is True
    assert "migrate (dry run): 3 run(s): 3 would" in dry.stderr

    # A batch refused for its own arguments publishes nothing: new runs still start on 1.0.0.
    (tmp_path / "map.yaml").write_text("[documents: papers\n")
    for wrong, says in (
        (["--from", "77.0.0"], "77.0.0"),
        (["--query", "Bogus = 'x'"], "--query"),
        (["--map-file", str(tmp_path / "map.yaml")], f"--map-file: {tmp_path / 'map.yaml'} is not valid YAML/JSON"),
    ):
        refused = await dsmo_cli(harness, *[a for a in move if a not in ("--from", "1.0.0")], *wrong)
        assert refused.returncode != 0 and says in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert (await dsmo.definition(agent)).version == "1.0.0"

    done = await dsmo_cli(harness, *move)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["summary"]["done"] == 3, done.stderr
    assert {o["runId"] for o in report["runs"]} == set(runs)
    v2 = await dsmo.definition(agent)  # --to FILE published it
    assert v2.version == "2.0.0"
    for run_id in runs:
        await waiting_on(dsmo, run_id, v2.workflow_version)

    # Again, without --from: every run is already on the target, nothing moves twice.
    again = await dsmo_cli(harness, *[a for a in move if a not in ("--from", "1.0.0")], "--to", v2.workflow_version)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["summary"]["skipped"] == 3

    run_id = runs[0]
    data = {"document": "payslip", "url": "s3://uploads/payslip.pdf"}
    await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", data, event_id=f"{run_id}-payslip")
    assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
    for check in (["audit", "verify", run_id], ["verify", run_id]):
        verified = await dsmo_cli(harness, *check)
        assert verified.returncode == 0, verified.stdout + verified.stderr
    for other in runs[1:]:
        await dsmo.cancel(other, reason="test over")


async def _visible(dsmo: DsmoClient, query: str, count: int) -> None:
    """Until visibility (written asynchronously) selects ``count`` runs."""

    async def selected() -> bool:
        return (await dsmo.temporal.count_workflows(query)).count == count

    await until(selected, f"visibility selects {count} runs for {query}")


async def test_an_interrupted_batch_is_finished_by_running_it_again_with_no_run_moved_twice(
    harness: Harness,
) -> None:
    dsmo, agent = harness.dsmo, _agent()
    v1 = await _published(dsmo, V1, agent)
    v2 = await _published(dsmo, V2, agent)
    runs = []
    for _ in range(8):
        run_id = await harness.start(v1, {"candidate": "ana"})
        runs.append(run_id)
    for run_id in runs:
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await _visible(dsmo, f"AgentName = '{agent}'", 8)
    move = ["runs", "migrate", agent, "--to", "2.0.0", "--map", "documents:papers", "--set", "priority=low"]
    # One run every half second: the batch is stopped after its second run moved.
    slow = subprocess.Popen(
        [str(BIN / "dsmo"), *move, "--rate", "2"],
        env=harness.cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    moved_lines: list[str] = []
    assert slow.stdout is not None
    while len(moved_lines) < 2:
        line = await asyncio.to_thread(slow.stdout.readline)
        assert line, slow.stderr.read() if slow.stderr else ""
        if line.startswith("migrated "):
            moved_lines.append(line)
    os.killpg(slow.pid, signal.SIGKILL)
    await asyncio.to_thread(slow.wait)

    again = await dsmo_cli(harness, *move, "--json")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)["summary"]
    assert summary["skipped"] >= 2 and summary["done"] + summary["skipped"] == 8, summary
    for run_id in runs:
        await waiting_on(dsmo, run_id, v2.workflow_version)
        trail = await dsmo.events(run_id)
        assert [e.type for e in trail].count("RUN_MIGRATED") == 1, run_id
        await dsmo.cancel(run_id, reason="test over")
