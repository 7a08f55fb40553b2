"""Data subjects on the real stack: whom a run is about, and its data sealed with that subject's key."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import io
import json
import re
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.service import RPCError, RPCStatusCode

from dsmo.activities.actions import ActionContext, ActionRegistry, FunctionAction
from dsmo.activities.artifacts import ArtifactErased, run_input_key
from dsmo.activities.plugin_errors import InvalidInput
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.activities.sealing import MAGIC
from dsmo.client.client_errors import EventNotAccepted, InvalidInputDocument, RunNotFound
from dsmo.client.definition_files import parse_definition_text
from dsmo.client.erasure import SubjectHasOpenRuns
from dsmo.client.run_archive import verify_archive
from dsmo.server.api_keys import KeyStore
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness
from tests.console_session import sign_in
from tests.ingress_server import serving
from tests.polling import until
from tests.rewind_flow import waiting_at

pytestmark = pytest.mark.integration

FLOW = """
agent: {agent}
version: "1"
inputs: [applicant]
subject: "{{{{applicant.id}}}}"
sensitive: [stages.review.summary.name]
start: hold
nodes:
  hold:
    actionType: invoke
    action: subject-hold
    input: {{for: "{{{{applicant.id}}}}"}}
    compensate: {{kind: annulment}}
    next: review
  review:
    actionType: run_agent
    agent: subject-copy
    next: check
  check:
    actionType: run_agent
    agent: subject-check
    next: reply
  reply:
    actionType: wait_for_response
    parameters: {{timeout: 1h, onTimeout: fail}}
    next: done
  done:
    actionType: send_message
    parameters: {{to: "{{{{applicant.id}}}}", message: "thank you"}}
"""


def _copy(document: dict[str, Any], message: StageMessage) -> ProcessorOutput:
    applicant = document["applicant"]
    return ProcessorOutput(document={"copied": document}, summary={"name": applicant["name"], "ok": True})


def _check(document: dict[str, Any], message: StageMessage) -> ProcessorOutput:
    if document["applicant"].get("fail"):
        raise InvalidInput("this applicant fails the check")
    return ProcessorOutput(document={"checked": True}, summary={"passed": True})


RELEASED: list[str] = []


def _hold(data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
    return {"held": ctx.run_id}


def _release(output: dict[str, Any], ctx: ActionContext) -> bool:
    RELEASED.append(ctx.run_id)
    return True


@pytest.fixture
def actions() -> ActionRegistry:
    registry = ActionRegistry()
    registry.add(FunctionAction("subject-hold", _hold, _release))
    return registry


@pytest.fixture
def registry() -> ProcessorRegistry:
    registry = ProcessorRegistry()
    registry.register("subject-copy", "1.0.0")(_copy)
    registry.register("subject-check", "1.0.0")(_check)
    return registry


def flow() -> AgentDefinition:
    return parse_definition_text(FLOW.format(agent=f"subject-{uuid.uuid4().hex[:8]}"))


def applicant(marker: str, **extra: Any) -> dict[str, Any]:
    return {"applicant": {"id": f"A-{uuid.uuid4().hex[:8]}", "name": marker, **extra}}


async def test_a_run_s_data_is_sealed_with_its_subject_s_key(harness: Harness) -> None:
    definition = flow()
    marker = f"MARKER-{uuid.uuid4().hex}"
    data = applicant(marker)
    run_id = await harness.start(definition, data)
    await waiting_at(harness, run_id, "reply")
    subject = data["applicant"]["id"]
    described = await harness.dsmo.temporal.get_workflow_handle(run_id).describe()
    assert described.typed_search_attributes.get(sa.DATA_SUBJECT) == subject
    created = (await harness.dsmo.events(run_id))[0]
    fingerprint = created.data["subject"]
    assert created.type == "RUN_CREATED" and fingerprint == harness.store.subjects.fingerprint(subject)
    assert subject not in str(created.data)
    # The input and both outputs are stored sealed: no plaintext in the bucket, readable with the key.
    uris = [harness.store.uri(run_input_key(definition.workflow_version, run_id))]
    uris += harness.store.list_uris(f"artifacts/{definition.workflow_version}/{run_id}/review/")
    for uri in uris:
        stored = harness.store.stored_or_none(harness.store.key_of(uri)[1])
        assert stored is not None and stored.startswith(MAGIC) and marker.encode() not in stored
    assert harness.store.read_json(uris[0]) == data
    # The trail keeps the sensitive summary field as a keyed fingerprint.
    succeeded = [e for e in await harness.dsmo.events(run_id) if e.type == "STAGE_SUCCEEDED" and e.stage == "review"]
    assert succeeded[0].data["summary"]["name"].startswith("hmac-sha256:")
    await harness.dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": "yes"})
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED


async def test_a_reply_from_another_sender_is_refused_naming_both_by_fingerprint(harness: Harness) -> None:
    definition = parse_definition(
        {
            "agent": f"subject-sender-{uuid.uuid4().hex[:8]}",
            "inputs": ["applicant"],
            "subject": "{{applicant.id}}",
            "start": "reply",
            "nodes": {
                "reply": {
                    "actionType": "wait_for_response",
                    "parameters": {"timeout": "1h", "expectedFrom": "{{applicant.phone}}"},
                }
            },
        }
    )
    phone, other = f"+3460{uuid.uuid4().int % 10**7:07d}", f"+3461{uuid.uuid4().int % 10**7:07d}"
    run_id = await harness.start(definition, applicant("M", phone=phone))
    await waiting_at(harness, run_id, "reply")
    # The update's refusal goes to its caller only; a raw signal's is recorded in the trail.
    with pytest.raises(EventNotAccepted, match=r"'hmac-sha256:[0-9a-f]+' is not the sender reply expects") as refused:
        await harness.dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": "yo", "from": other}, event_id="m-1")
    assert phone not in str(refused.value) and other not in str(refused.value)
    await harness.dsmo.signal_event(run_id, "MESSAGE_RECEIVED", {"event_id": "m-2", "text": "yo", "from": other})
    await harness.dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": "sí", "from": phone}, event_id="m-3")
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED
    trail = await harness.dsmo.events(run_id)
    rejected = [event.data for event in trail if event.type == "EVENT_REJECTED"]
    assert len(rejected) == 1 and "hmac-sha256:" in rejected[0]["reason"]
    assert phone not in str([event.data for event in trail]) and other not in str(rejected)


async def test_a_start_without_the_subject_s_value_is_refused_naming_it(harness: Harness) -> None:
    with pytest.raises(InvalidInputDocument, match=r"^input: subject: .*applicant\.id"):
        await harness.start(flow(), {"applicant": {"name": "x"}})


def store_files_holding(harness: Harness, needle: bytes) -> list[str]:
    """The files of the object store's own data folder (SeaweedFS volumes, filer) holding ``needle``."""
    found = []
    for path in (harness.settings.state_dir / "seaweed").rglob("*"):
        if path.is_file() and needle in path.read_bytes():
            found.append(str(path))
    return found


async def ended(harness: Harness, run_id: str) -> RunStatus:
    return (await harness.dsmo.result(run_id)).status


async def test_erasing_a_subject_leaves_no_plaintext_and_trails_that_still_verify(harness: Harness) -> None:
    definition = flow()
    marker = f"MARKER-{uuid.uuid4().hex}"
    subject = f"A-{uuid.uuid4().hex[:8]}"
    person = {"applicant": {"id": subject, "name": marker, "notes": f"lives at {marker}"}}
    completed = await harness.start(definition, person)
    failed = await harness.start(definition, {"applicant": {**person["applicant"], "fail": True}})
    waiting = await harness.start(definition, person)
    other = await harness.start(definition, applicant(f"OTHER-{uuid.uuid4().hex}"))
    for run_id in (completed, waiting, other):
        await waiting_at(harness, run_id, "reply")
    for run_id in (completed, other):
        await harness.dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": "yes"})
        assert await ended(harness, run_id) is RunStatus.COMPLETED
    assert await ended(harness, failed) is RunStatus.FAILED
    # A plaintext object is found by the scan (the store keeps what it is given as it is), so
    # the scan below would see the marker if any object held it in the clear.
    control = f"CONTROL-{uuid.uuid4().hex}"
    harness.store.put_json_once(f"uploads/{uuid.uuid4().hex[:8]}/control.json", {"text": control})
    runs = sorted([completed, failed, waiting])
    artifacts = [
        uri for run_id in runs for uri in harness.store.list_uris(f"artifacts/{definition.workflow_version}/{run_id}/")
    ]
    artifacts += harness.store.list_uris(f"dlq/{failed}/")
    assert len(artifacts) >= 8 and harness.store.read_json(artifacts[0])

    before = await harness.dsmo.export(completed)
    assert verify_archive(before.data).ok and not before.unreadable

    plan = await harness.dsmo.erase_subject(subject, reason="asked to be forgotten", dry_run=True)
    assert [run.run_id for run in plan.plan.runs] == runs and plan.plan.open_runs == [waiting]
    assert plan.record is None and plan.plan.key_exists
    with pytest.raises(SubjectHasOpenRuns, match=waiting):
        await harness.dsmo.erase_subject(subject, reason="asked to be forgotten", by="dpo")
    assert harness.store.read_json(artifacts[0])  # refused: nothing was destroyed

    report = await harness.dsmo.erase_subject(subject, reason="asked to be forgotten", by="dpo", cancel_runs=True)
    assert report.cancelled == [waiting] and waiting in RELEASED  # cancelled, and its saga compensated
    assert report.histories_deleted >= 3
    for uri in artifacts:
        with pytest.raises(ArtifactErased, match="erased"):
            harness.store.read_bytes(uri)
    assert store_files_holding(harness, control.encode())
    assert store_files_holding(harness, marker.encode()) == []
    for run_id in runs:
        await history_gone(harness, run_id)
        verified = await harness.dsmo.verify_trail(run_id)
        assert verified.ok and verified.erased and verified.erasure is not None
        assert verified.erasure["seq"] == report.record["seq"] if report.record else False
    records, chain = await harness.dsmo.erasures()
    assert chain.ok and records[-1]["runs"] == runs and records[-1]["by"] == "dpo"
    assert records[-1]["subject"] == harness.store.subjects.fingerprint(subject) and subject not in str(records)
    # The archive exported before still verifies offline; one exported now has no data left to show.
    assert verify_archive(before.data).ok
    after = await harness.dsmo.export(completed)
    assert verify_archive(after.data).ok and set(after.unreadable.values()) >= {
        "erased (its data subject was erased)",
        "history deleted (erasure or retention)",
    }
    assert marker.encode() not in after.data and b"SUBJECT_ERASED" in zipfile.ZipFile(io.BytesIO(after.data)).read(
        "erasures.jsonl"
    )
    # The other subject's run is untouched.
    assert harness.store.read_json(harness.store.uri(run_input_key(definition.workflow_version, other)))
    assert (await harness.dsmo.result(other)).status is RunStatus.COMPLETED
    assert not (await harness.dsmo.verify_trail(other)).erased


async def history_gone(harness: Harness, run_id: str) -> None:
    """Temporal deletes an execution in the background, several seconds each on the dev server:
    wait for it (a hang guard, not a target)."""
    handle = harness.dsmo.temporal.get_workflow_handle(run_id)

    async def gone() -> bool:
        try:
            await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return True
            raise
        return False

    await until(gone, f"{run_id}: history deleted", seconds=180)


async def test_an_export_verifies_offline_and_a_tampered_archive_names_the_object(
    harness: Harness, tmp_path: Path
) -> None:
    marker = f"MARKER-{uuid.uuid4().hex}"
    run_id = await harness.start(flow(), applicant(marker))
    await waiting_at(harness, run_id, "reply")
    await harness.dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": "yes"})
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED
    archive = tmp_path / "run.zip"
    exported = await dsmo_cli(harness, "runs", "export", run_id, "-o", str(archive))
    assert exported.returncode == 0, exported.stderr
    with zipfile.ZipFile(archive) as opened:
        names = set(opened.namelist())
        contents = {name: opened.read(name) for name in names}
    assert {"manifest.json", f"runs/{run_id}/trail.jsonl", f"runs/{run_id}/history.json"} <= names
    output = next(name for name in names if name.endswith("review/attempt=1/output.json"))
    assert marker.encode() in contents[output]  # the export is the readable record, in the clear
    # Offline: no server answers at these addresses.
    offline = {**harness.cli_env(), "TEMPORAL_ADDRESS": "127.0.0.1:1", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:1"}
    verified = await dsmo_cli(harness, "audit", "verify", "--archive", str(archive), env=offline)
    assert verified.returncode == 0 and verified.stdout.startswith("ok: 1 run(s)"), verified.stdout + verified.stderr
    tampered = tmp_path / "tampered.zip"
    with zipfile.ZipFile(tampered, "w") as rewritten:
        for name, body in contents.items():
            rewritten.writestr(name, body.replace(marker.encode(), b"SOMEONE-ELSE") if name == output else body)
    refused = await dsmo_cli(harness, "audit", "verify", "--archive", str(tampered), env=offline)
    assert refused.returncode == 1 and refused.stdout.startswith(f"TAMPERED: {output}: its SHA-256"), refused.stdout
    # Rewriting the manifest to match does not help: the trail's chain recorded the output's hash.
    changed = contents[output].replace(marker.encode(), b"SOMEONE-ELSE")
    manifest = json.loads(contents["manifest.json"])
    manifest["files"][output] = {"sha256": hashlib.sha256(changed).hexdigest(), "bytes": len(changed)}
    forged = {**contents, output: changed, "manifest.json": json.dumps(manifest).encode()}
    with zipfile.ZipFile(tampered, "w") as rewritten:
        for name, body in forged.items():
            rewritten.writestr(name, body)
    refused = await dsmo_cli(harness, "audit", "verify", "--archive", str(tampered), env=offline)
    assert refused.stdout.startswith(f"TAMPERED: {output}: differs from the output the trail recorded"), refused.stdout
    pin = exported.stdout.split("manifest sha256 ")[1].split()[0]
    pinned = await dsmo_cli(
        harness, "audit", "verify", "--archive", str(archive), "--manifest-sha256", pin, env=offline
    )
    assert pinned.returncode == 0, pinned.stdout
    wrong = await dsmo_cli(
        harness, "audit", "verify", "--archive", str(tampered), "--manifest-sha256", pin, env=offline
    )
    assert wrong.returncode == 1 and "manifest.json: its SHA-256 is not the one given" in wrong.stdout


async def dsmo_cli(harness: Harness, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).parent / "dsmo"), *args]
    return await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, env=env or harness.cli_env(), timeout=120
    )


async def test_console_and_replay_say_erased(harness: Harness, tmp_path: Path) -> None:
    marker = f"MARKER-{uuid.uuid4().hex}"
    subject = f"A-{uuid.uuid4().hex[:8]}"
    run_id = await harness.start(flow(), {"applicant": {"id": subject, "name": marker}})
    await waiting_at(harness, run_id, "reply")
    await harness.dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": "yes"})
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    key = KeyStore(settings.api_keys_path).add("person", ["read"])
    with serving(settings) as url, httpx.Client(base_url=url, timeout=30) as browser:
        sign_in(browser, key)
        page = browser.get(f"/console/runs/{run_id}")
        links = re.findall(r'href="(/console/runs/[^"]+/artifacts/[^"]+)"', page.text)
        assert page.status_code == 200 and links and "erased" not in page.text
        opened = browser.get(links[0])  # served opened: the store holds it sealed
        assert opened.status_code == 200 and marker in opened.text

        await harness.dsmo.erase_subject(subject, reason="asked to be forgotten")
        await history_gone(harness, run_id)
        page = browser.get(f"/console/runs/{run_id}")
        assert page.status_code == 200 and "Temporal no longer has this run (its data subject was erased)" in page.text
        assert page.text.count(">erased</strong>") >= 2 and marker not in page.text
        gone = browser.get(links[0])
        assert gone.status_code == 410 and "erased" in gone.text and marker not in gone.text
    with pytest.raises(DsmoError, match="erased"):
        await harness.dsmo.replay(run_id)
    # `dsmo status` says the same as the console: the run as its trail recorded it, and why.
    shown = await dsmo_cli(harness, "status", run_id)
    assert shown.returncode == 0, shown.stderr
    lines = dict(line.split(None, 1) for line in shown.stdout.splitlines() if line.strip())
    assert lines["status"].strip() == "completed"
    assert lines["problem"].strip().startswith("Temporal no longer has this run (its data subject was erased)")
    assert marker not in shown.stdout and subject not in shown.stdout


async def test_a_child_inherits_its_parent_s_subject_unless_it_names_its_own(harness: Harness) -> None:
    marker = f"MARKER-{uuid.uuid4().hex}"
    subject = f"A-{uuid.uuid4().hex[:8]}"
    inherits = f"child-{uuid.uuid4().hex[:6]}"
    owns = f"child-{uuid.uuid4().hex[:6]}"
    message = {"actionType": "send_message", "parameters": {"to": "x@example.com", "message": "hi"}}
    await harness.dsmo.publish(parse_definition({"agent": inherits, "start": "m", "nodes": {"m": message}}))
    own = {"agent": owns, "inputs": ["person"], "subject": "{{person.id}}", "start": "m", "nodes": {"m": message}}
    await harness.dsmo.publish(parse_definition(own))
    parent = parse_definition(
        {
            "agent": f"parent-{uuid.uuid4().hex[:6]}",
            "inputs": ["applicant"],
            "subject": "{{applicant.id}}",
            "start": "a",
            "nodes": {
                "a": {
                    "actionType": "trigger_agent",
                    "parameters": {
                        "agent": inherits,
                        "input": {"note": "{{applicant.name}}"},
                        "waitForCompletion": True,
                    },
                    "next": "b",
                },
                "b": {
                    "actionType": "trigger_agent",
                    "parameters": {
                        "agent": owns,
                        "input": {"person": {"id": "B-{{applicant.id}}"}},
                        "waitForCompletion": True,
                    },
                },
            },
        }
    )
    run_id = await harness.start(parent, {"applicant": {"id": subject, "name": marker}})
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED
    children = {
        e.data["childAgent"]: e.data["childExecutionId"]
        for e in await harness.dsmo.events(run_id)
        if e.type == "RUN_WAITING" and "childExecutionId" in e.data
    }
    subjects = {}
    for agent, child in children.items():
        described = await harness.dsmo.temporal.get_workflow_handle(child).describe()
        subjects[agent] = described.typed_search_attributes.get(sa.DATA_SUBJECT)
        created = (await harness.dsmo.events(child))[0]
        expected = subjects[agent]
        assert created.data["subject"] == harness.store.subjects.fingerprint(str(expected))
    assert subjects == {inherits: subject, owns: f"B-{subject}"}
    # The inheriting child's input (the parent's data) is sealed with the parent's subject's key.
    version = (await harness.dsmo.definition(inherits)).workflow_version
    stored = harness.store.stored_or_none(run_input_key(version, children[inherits])) or b""
    assert stored.startswith(MAGIC) and marker.encode() not in stored
    plan = await harness.dsmo.erase_subject(subject, reason="check", dry_run=True)
    assert sorted(run.run_id for run in plan.plan.runs) == sorted([run_id, children[inherits]])
    # A replay of the inheriting child is about the same subject, its data sealed as the original's.
    replayed = (await harness.dsmo.replay(children[inherits], task_queue=harness.task_queue)).replay
    described = await harness.dsmo.temporal.get_workflow_handle(replayed).describe()
    assert described.typed_search_attributes.get(sa.DATA_SUBJECT) == subject
    stored = harness.store.stored_or_none(run_input_key(version, replayed)) or b""
    assert stored.startswith(MAGIC) and marker.encode() not in stored


async def test_a_document_for_a_subject_s_run_is_sealed_on_its_way_in(harness: Harness, tmp_path: Path) -> None:
    marker = f"MARKER-{uuid.uuid4().hex}"
    definition = parse_definition(
        {
            "agent": f"docs-{uuid.uuid4().hex[:6]}",
            "inputs": ["applicant"],
            "subject": "{{applicant.id}}",
            "start": "docs",
            "nodes": {
                "docs": {
                    "actionType": "request_document",
                    "parameters": {"documents": ["id"], "to": "a@example.com", "timeout": "1h", "onTimeout": "fail"},
                }
            },
        }
    )
    run_id = await harness.start(definition, {"applicant": {"id": f"A-{uuid.uuid4().hex[:8]}"}})
    await waiting_at(harness, run_id, "docs")
    # Larger than the API's 64 KiB body cap: documents have their own (25 MiB).
    document = {"name": marker, "scan": "x" * 300_000}
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    key = KeyStore(settings.api_keys_path).add("person", ["read", "events:*"])
    with serving(settings) as url, httpx.Client(base_url=url, timeout=30) as browser:
        # Off the event loop: the worker answering the page's queries runs on it, in this process.
        await asyncio.to_thread(sign_in, browser, key)
        page = (await asyncio.to_thread(browser.get, f"/console/runs/{run_id}")).text
        action = re.search(r'<form method="post" action="(/console/runs/[^"]+/upload/[^"]+)"', page)
        assert action is not None, page[:2000]  # to the console, not straight to the store
        token = re.search(r'name="csrf_token" value="([^"]+)"', page[page.index(action.group(1)) :])
        assert token is not None
        posted = await asyncio.to_thread(
            functools.partial(
                browser.post,
                action.group(1).replace("&amp;", "&"),
                data={"csrf_token": token.group(1)},
                files={"file": ("passport.json", json.dumps(document).encode(), "application/json")},
                follow_redirects=False,
            )
        )
        assert posted.status_code == 303, posted.text[:500]
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED
    uploads = harness.store.list_uris(f"uploads/{run_id}/")
    assert len(uploads) == 1 and uploads[0].endswith("/passport.json")
    stored = harness.store.stored_or_none(harness.store.key_of(uploads[0])[1]) or b""
    assert stored.startswith(MAGIC) and marker.encode() not in stored
    assert harness.store.read_json(uploads[0]) == document


async def test_the_cli_erases_a_subject_and_checks_the_erasure_log(harness: Harness) -> None:
    subject = f"A-{uuid.uuid4().hex[:8]}"
    run_id = await harness.start(flow(), {"applicant": {"id": subject, "name": "x"}})
    await waiting_at(harness, run_id, "reply")
    dry = await dsmo_cli(harness, "subjects", "erase", subject, "--reason", "request 7", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert planned["dryRun"] and planned["openRuns"] == [run_id] and planned["record"] is None
    refused = await dsmo_cli(harness, "subjects", "erase", subject, "--reason", "request 7")
    assert refused.returncode == 1 and refused.stderr.startswith("error: subject has 1 open run(s)"), refused.stderr
    no_reason = await dsmo_cli(harness, "subjects", "erase", subject, "--reason", " ")
    assert no_reason.returncode == 1 and "reason: say why" in no_reason.stderr
    erased = await dsmo_cli(
        harness, "subjects", "erase", subject, "--reason", "request 7", "--by", "dpo", "--cancel-runs"
    )
    assert erased.returncode == 0 and "(cancelled first)" in erased.stdout and "erasure log record #" in erased.stdout
    # The erasure returns once Temporal no longer serves the cancelled run's history.
    with pytest.raises(RunNotFound):
        await harness.dsmo.result(run_id)
    assert [e.type for e in await harness.dsmo.events(run_id)][-1] == "RUN_ABORTED"
    log = await dsmo_cli(harness, "subjects", "log")
    assert log.returncode == 0 and "by dpo: request 7" in log.stdout
    verified = await dsmo_cli(harness, "audit", "verify", "--erasures")
    assert verified.returncode == 0 and verified.stdout.startswith("ok: "), verified.stdout + verified.stderr
    trail = await dsmo_cli(harness, "audit", "verify", run_id)
    assert trail.returncode == 0 and "erased: " in trail.stdout, trail.stdout + trail.stderr
