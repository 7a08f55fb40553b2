"""Forking a run on the real stack: a new linked run keeps what its original did before a node and
runs live from there; no earlier agent is called again (counted), and the original is untouched."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest

from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.client.definition_files import parse_definition_text
from dsmo.server.api_keys import KeyStore
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.model import AgentDefinition
from tests.conftest import Harness
from tests.console_session import sign_in
from tests.ingress_server import serving

pytestmark = pytest.mark.asyncio

BIN = Path(sys.executable).parent
CALLS: Counter[str] = Counter()
LOCK = threading.Lock()
COUNTING = ProcessorRegistry()


def _count(name: str) -> None:
    with LOCK:
        CALLS[name] += 1


@COUNTING.register("fork-profile", "1.0.0")
def _profile(document: object, message: StageMessage) -> ProcessorOutput:
    _count(f"{message.run_id}:profile")
    return ProcessorOutput(document={"profiled": True}, summary={"profiled": True})


@COUNTING.register("fork-reader", "1.0.0")
def _reader(document: dict[str, object], message: StageMessage) -> ProcessorOutput:
    _count(f"{message.run_id}:read")
    if not document.get("valid"):
        raise ValueError("the document is not valid")
    return ProcessorOutput(document={"read": True}, summary={"pages": 3})


@pytest.fixture
def registry() -> ProcessorRegistry:
    return COUNTING


FLOW = """
agent: {agent}
version: "{version}"
start: profile
nodes:
  profile:
    actionType: run_agent
    agent: fork-profile
    next: ask
  ask:
    actionType: wait_for_response
    parameters: {{timeout: 1h, onTimeout: fail}}
    next: read
  read:
    actionType: run_agent
    agent: fork-reader
    input: "{{{{docUrl}}}}"
    retry: {{maxAttempts: 1}}
    next: {after_read}
  bye:
    actionType: send_message
    parameters: {{message: "read {{{{stages.read.summary.pages}}}} pages, said {{{{lastResponse}}}}"}}
{extra}"""


def _flow(agent: str, version: str, *, after_read: str = "bye", extra: str = "") -> AgentDefinition:
    return parse_definition_text(FLOW.format(agent=agent, version=version, after_read=after_read, extra=extra))


async def _failed_run(harness: Harness, agent: str) -> tuple[str, str, str]:
    """A run that read a broken document and failed at `read`; the broken and the good documents' URIs."""
    store, dsmo = harness.store, harness.dsmo
    key = uuid.uuid4().hex[:8]
    bad = store.put_json_once(f"uploads/{key}/bad.json", {"valid": False}).uri
    good = store.put_json_once(f"uploads/{key}/good.json", {"valid": True}).uri
    run_id = await harness.start(_flow(agent, "1"), {"docUrl": bad})
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.respond(run_id, "sí", event_id=f"{run_id}-reply")
    result = await dsmo.result(run_id)
    assert (result.status, result.failed_action_id) == (RunStatus.FAILED, "read")
    return run_id, bad, good


async def test_a_failed_run_forked_from_its_failing_stage_with_a_corrected_input_completes(
    harness: Harness,
) -> None:
    dsmo, agent = harness.dsmo, f"fork-{uuid.uuid4().hex[:8]}"
    original, _, good = await _failed_run(harness, agent)
    original_trail = len(await dsmo.events(original))

    fork = await dsmo.fork(original, "read", set_variables={"docUrl": good}, task_queue=harness.task_queue)
    harness.started.append(fork)
    result = await dsmo.result(fork)
    assert result.status is RunStatus.COMPLETED, result.error_message
    assert result.path == ["profile", "ask", "read", "bye"]
    assert result.variables["lastResponse"] == "sí"  # the reply the original took, not asked again
    # No earlier agent ran again: profile reused its committed output; only `read` ran, live.
    assert (CALLS[f"{fork}:profile"], CALLS[f"{fork}:read"]) == (0, 1)
    assert harness.messages(fork)[-1]["message"] == "read 3 pages, said sí"
    events = await dsmo.events(fork)
    assert events[0].data["forkOf"] == original and events[0].data["fromNode"] == "read"
    [forked] = [e for e in events if e.type == "RUN_FORKED"]
    assert (forked.stage, forked.data["forkOf"], forked.data["set"]) == ("read", original, {"docUrl": good})
    ran = [e.stage for e in events if e.type == "STAGE_SUCCEEDED" and not e.data.get("reused")]
    assert ran == ["read"]  # `profile` was reused (its STAGE_SUCCEEDED says so)
    # The original is as it was.
    assert len(await dsmo.events(original)) == original_trail
    assert (await dsmo.status(original)).status is RunStatus.FAILED


async def test_a_fork_onto_version_2_with_a_map_runs_version_2_from_the_node(harness: Harness) -> None:
    dsmo, agent = harness.dsmo, f"fork-{uuid.uuid4().hex[:8]}"
    original, _, good = await _failed_run(harness, agent)
    checked = "  check:\n    actionType: send_message\n    parameters: {message: checking}\n    next: bye\n"
    v2 = parse_definition_text(
        FLOW.format(agent=agent, version="2", after_read="check", extra=checked)
        .replace("  read:", "  reading:")
        .replace("next: read", "next: reading")
        .replace("stages.read.", "stages.reading.")
    )
    await dsmo.publish(v2)
    fork = await dsmo.fork(
        original,
        "read",
        set_variables={"docUrl": good},
        to="2",
        node_map={"read": "reading"},
        task_queue=harness.task_queue,
    )
    harness.started.append(fork)
    result = await dsmo.result(fork)
    assert result.status is RunStatus.COMPLETED, result.error_message
    assert [m["message"] for m in harness.messages(fork)] == ["checking", "read 3 pages, said sí"]
    events = await dsmo.events(fork)
    types = [e.type for e in events]
    assert types.index("RUN_FORKED") < types.index("RUN_MIGRATED")
    assert [e.stage for e in events if e.type == "STAGE_SUCCEEDED" and not e.data.get("reused")] == ["reading"]
    assert (await dsmo.status(fork)).workflow_version == v2.workflow_version


async def test_a_fork_is_refused_before_anything_starts(harness: Harness) -> None:
    dsmo, agent = harness.dsmo, f"fork-{uuid.uuid4().hex[:8]}"
    original, _, _ = await _failed_run(harness, agent)
    with pytest.raises(DsmoError, match=r"^--from: 'nowhere' is not a node of"):
        await dsmo.fork(original, "nowhere", task_queue=harness.task_queue)
    with pytest.raises(DsmoError, match=r"^--from: run .* never reached 'bye'"):
        await dsmo.fork(original, "bye", task_queue=harness.task_queue)
    runs = [r async for r in dsmo.temporal.list_workflows(f"WorkflowId STARTS_WITH '{original}.fork'")]
    assert runs == []


async def test_dsmo_runs_fork_starts_the_fork_and_says_its_id(harness: Harness) -> None:
    dsmo, agent = harness.dsmo, f"fork-{uuid.uuid4().hex[:8]}"
    original, _, good = await _failed_run(harness, agent)
    fork_id = f"{original}.fixed"
    done = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), "runs", "fork", original, "--from", "read", "--set", f"docUrl={good}", "--id", fork_id],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"forked {original} from read as {fork_id}"
    harness.started.append(fork_id)
    assert (await dsmo.result(fork_id)).status is RunStatus.COMPLETED
    refused = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), "runs", "fork", original, "--from", "bye"],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=120,
        check=False,
    )
    assert refused.returncode != 0 and refused.stderr.strip().startswith("error: --from: run")
    assert "Traceback" not in refused.stderr


async def test_forks_are_listed_under_their_origin_in_status_and_the_console(harness: Harness, tmp_path: Path) -> None:
    dsmo, agent = harness.dsmo, f"fork-{uuid.uuid4().hex[:8]}"
    original, _, good = await _failed_run(harness, agent)
    fork = await dsmo.fork(original, "read", set_variables={"docUrl": good}, task_queue=harness.task_queue)
    harness.started.append(fork)
    await dsmo.result(fork)
    assert [(f["forkId"], f["fromNode"], f["set"]) for f in await dsmo.forks(original)] == [(fork, "read", ["docUrl"])]
    status = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), "status", original],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=120,
        check=False,
    )
    assert f"fork       {fork} (live from read)" in status.stdout, status.stdout + status.stderr

    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    key = KeyStore(settings.api_keys_path).add("person", ["read"])
    with serving(settings) as url, httpx.Client(base_url=url, timeout=60) as browser:
        await asyncio.to_thread(sign_in, browser, key)
        origin_page = (await asyncio.to_thread(browser.get, f"/console/runs/{original}")).text
        fork_page = (await asyncio.to_thread(browser.get, f"/console/runs/{fork}")).text
    assert f'href="/console/runs/{fork}"' in origin_page and "Forks:" in origin_page
    assert f'href="/console/runs/{original}"' in fork_page and "Fork of" in fork_page
