"""What-if on the real stack: recorded runs replayed against a candidate version name exactly the runs
whose path changes and where, call no agent whose output the record holds, and reach nobody."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path

import pytest

from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.client.definition_files import parse_definition_text
from dsmo.client.dsmo_client import DsmoClient
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from tests.conftest import Harness
from tests.polling import until

pytestmark = pytest.mark.asyncio

BIN = Path(sys.executable).parent
CALLS: Counter[str] = Counter()
LOCK = threading.Lock()
COUNTING = ProcessorRegistry()


@COUNTING.register("whatif-profile", "1.0.0")
def _profile(document: object, message: StageMessage) -> ProcessorOutput:
    with LOCK:
        CALLS[message.run_id] += 1
    return ProcessorOutput(document={"profiled": True}, summary={"profiled": True})


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
    agent: whatif-profile
    next: ask
  ask:
    actionType: send_message
    parameters: {{message: "still interested?"}}
    next: reply
  reply:
    actionType: wait_for_response
    parameters: {{timeout: 1h, onTimeout: fail}}
    transitions:
      - {{when: 'lastResponse == "yes"', to: accept}}
{extra_transition}      - {{to: reject}}
  accept:
    actionType: send_message
    parameters: {{message: "welcome"}}
  reject:
    actionType: send_message
    parameters: {{message: "goodbye"}}
{extra}"""
FOLLOW_UP = """  follow_up:
    actionType: send_message
    parameters: {message: "can we call you?"}
"""


NO_TO_FOLLOW_UP = """      - {when: 'lastResponse == "no"', to: follow_up}
"""


def flow(agent: str, version: str, otherwise: str) -> str:
    """The flow; with ``follow_up``, a "no" is followed up instead of said goodbye to."""
    follow = otherwise == "follow_up"
    return FLOW.format(
        agent=agent,
        version=version,
        extra=FOLLOW_UP if follow else "",
        extra_transition=NO_TO_FOLLOW_UP if follow else "",
    )


async def test_a_candidate_that_changes_one_transition_diverges_exactly_the_runs_it_reroutes(
    harness: Harness, tmp_path: Path
) -> None:
    dsmo, agent = harness.dsmo, f"whatif-{uuid.uuid4().hex[:8]}"
    v1 = parse_definition_text(flow(agent, "1", "reject"))
    answers = ["yes", "no", "yes", "no", "yes", "maybe", "yes", "yes"]
    runs = [await harness.start(v1) for _ in answers]
    for run_id, answer in zip(runs, answers, strict=True):
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        await dsmo.respond(run_id, answer, event_id=f"{run_id}-reply")
        assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
    query = f"AgentName = '{agent}'"
    await until(lambda: _completed(dsmo, agent, len(runs)), f"visibility lists the {len(runs)} runs as completed")
    sent_before = sum(len(harness.messages(run_id)) for run_id in runs)
    calls_before = sum(CALLS.values())

    # Version 2 asks the ones who said no whether it may call them, instead of saying goodbye.
    candidate = tmp_path / "v2.yaml"
    candidate.write_text(flow(agent, "2", "follow_up"))
    done = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), "replay", "--query", query, "--definition", str(candidate), "--json"],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr  # some paths diverged
    assert done.stdout, done.stderr
    report = json.loads(done.stdout)
    assert report["summary"]["runs"] == len(runs) and report["summary"]["errors"] == 0
    diverged = {run["run_id"] for run in report["runs"] if not run["same_path"]}
    assert diverged == {run_id for run_id, answer in zip(runs, answers, strict=True) if answer == "no"}
    assert report["summary"]["byDivergence"] == {"after reply: reject -> follow_up": 2}
    for run in report["runs"]:
        harness.started.append(run["replay_id"])
    # The record answered everything: no agent ran again, nobody was sent anything.
    assert sum(CALLS.values()) == calls_before
    assert sum(len(harness.messages(run_id)) for run_id in runs) == sent_before
    assert all(not harness.messages(run["replay_id"]) for run in report["runs"])

    # The same version under another label changes no path: exit status 0. (The filter picks three
    # recorded runs; what-if replays it would also find are skipped, not counted as runs.)
    three = " OR ".join(f"WorkflowId = '{run_id}'" for run_id in runs[:3])
    same = tmp_path / "v1b.yaml"
    same.write_text(flow(agent, "1b", "reject"))
    again = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), "replay", "--query", three, "--definition", str(same), "--limit", "3"],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=300,
        check=False,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "3 run(s), 3 same path, 0 diverged, 0 error(s)" in again.stdout


async def test_a_bad_filter_is_one_line_and_exit_status_2(harness: Harness, tmp_path: Path) -> None:
    candidate = tmp_path / "v2.yaml"
    candidate.write_text(flow("whatif-x", "2", "follow_up"))
    done = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), "replay", "--query", "NoSuchField = 'x' AND", "--definition", str(candidate)],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and done.stderr.startswith("error: --query:"), done.stderr
    assert "Traceback" not in done.stderr


async def test_a_candidate_with_a_renamed_wait_still_takes_the_recorded_replies(
    harness: Harness, tmp_path: Path
) -> None:
    dsmo, agent = harness.dsmo, f"whatif-{uuid.uuid4().hex[:8]}"
    v1 = parse_definition_text(flow(agent, "1", "reject"))
    runs = [await harness.start(v1) for _ in range(2)]
    for run_id, answer in zip(runs, ["yes", "no"], strict=True):
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        await dsmo.respond(run_id, answer, event_id=f"{run_id}-reply")
        await dsmo.result(run_id)
    # Version 2 calls the wait `answer` and says so first: the replies are taken by the wait's kind.
    renamed = flow(agent, "2", "reject").replace("next: reply", "next: notice").replace("  reply:", "  answer:")
    renamed += (
        '  notice:\n    actionType: send_message\n    parameters: {message: "reply when you can"}\n    next: answer\n'
    )
    candidate = parse_definition_text(renamed)
    await until(lambda: _completed(dsmo, agent, 2), "visibility lists the two runs as completed")
    report = await dsmo.what_if(f"AgentName = '{agent}'", candidate, task_queue=harness.task_queue)
    harness.started.extend(run.replay_id for run in report.runs)
    assert report.summary()["errors"] == 0
    assert {run.candidate_status for run in report.runs} == {"completed"}
    assert report.summary()["byDivergence"] == {"after ask: reply -> notice": 2}
    ends = {run.run_id: run.candidate_path[-1] for run in report.runs}
    assert ends == {runs[0]: "accept", runs[1]: "reject"}  # each reply took its run where it took the original
    # Asked again, the filter also finds the first replays: they are skipped, not taken as recorded runs.
    await until(lambda: _completed(dsmo, agent, 4), "visibility lists the runs and their replays as completed")
    again = await dsmo.what_if(f"AgentName = '{agent}'", candidate, task_queue=harness.task_queue)
    harness.started.extend(run.replay_id for run in again.runs)
    assert again.summary()["runs"] == 2 and again.batch.summary()["skipped"] == 2


async def test_a_wait_the_record_cannot_answer_ends_the_replay_and_is_reported(harness: Harness) -> None:
    dsmo, agent = harness.dsmo, f"whatif-{uuid.uuid4().hex[:8]}"
    v1 = parse_definition_text(flow(agent, "1", "reject"))
    run_id = await harness.start(v1)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.respond(run_id, "yes", event_id=f"{run_id}-reply")
    await dsmo.result(run_id)
    # Version 2 asks for a signature before welcoming: the record holds none, and none is invented.
    signing = '  sign:\n    actionType: request_signature\n    parameters: {document: "s3://c"}\n    next: accept\n'
    candidate = parse_definition_text(flow(agent, "2", "reject").replace("to: accept}", "to: sign}") + signing)
    await until(lambda: _completed(dsmo, agent, 1), "visibility lists the run as completed")
    report = await dsmo.what_if(f"AgentName = '{agent}'", candidate, task_queue=harness.task_queue)
    harness.started.extend(run.replay_id for run in report.runs)
    (replayed,) = report.runs
    assert (replayed.candidate_status, replayed.candidate_path[-1]) == ("failed", "sign")
    assert "never resumed in a signature wait" in (replayed.problem or ""), replayed
    assert replayed.diverged_after == "reply" and replayed.candidate_next == "sign"


async def _completed(dsmo: DsmoClient, agent: str, count: int) -> bool:
    """Whether visibility (written asynchronously) lists ``count`` of the agent's runs as completed."""
    return (
        await dsmo.temporal.count_workflows(f"AgentName = '{agent}' AND ExecutionStatus = 'Completed'")
    ).count == count


async def test_a_run_cancelled_while_it_waited_is_the_same_path_when_the_candidate_waits_there_too(
    harness: Harness,
) -> None:
    dsmo, agent = harness.dsmo, f"whatif-{uuid.uuid4().hex[:8]}"
    v1 = parse_definition_text(flow(agent, "1", "reject"))
    run_id = await harness.start(v1)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.cancel(run_id, reason="no longer needed")
    assert (await dsmo.result(run_id)).status is RunStatus.CANCELLED
    await until(lambda: _ended_as(dsmo, agent, "Canceled"), "visibility lists the run as cancelled")
    candidate = parse_definition_text(flow(agent, "2", "follow_up"))
    report = await dsmo.what_if(f"AgentName = '{agent}'", candidate, task_queue=harness.task_queue)
    harness.started.extend(run.replay_id for run in report.runs)
    (replayed,) = report.runs
    assert (replayed.same_path, replayed.problem) == (True, None), replayed
    assert (replayed.original_status, replayed.candidate_status) == ("cancelled", "cancelled")
    summary = report.summary()
    assert (summary["samePath"], summary["errors"], summary["byStatus"]) == (1, 0, {"cancelled -> cancelled": 1})


async def _ended_as(dsmo: DsmoClient, agent: str, status: str) -> bool:
    """Whether visibility lists one of the agent's runs with this Temporal status."""
    query = f"AgentName = '{agent}' AND ExecutionStatus = '{status}'"
    return (await dsmo.temporal.count_workflows(query)).count == 1
