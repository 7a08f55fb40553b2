"""Replay and what-if of an `llm` agent that loops (think -> tool -> think -> tool -> think -> end),
with the model served by a local OpenAI-compatible server: every visit is replayed from the
attempt it committed (a worker killed mid-call included), with no model call, and compared."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bench.llm_server import ChatServer, Reply
from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.messaging import FileChannel
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import REPO, Harness
from tests.loop_tools import registry_with_loop_tool
from tests.polling import until
from tests.worker_processes import kill_worker, start_worker_process

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
ANSWER = {
    "type": "object",
    "required": ["action", "step"],
    "properties": {
        "action": {"enum": ["tool", "done", "refund"]},
        "step": {"type": "integer"},
        "note": {"type": "string"},
    },
}


def loop(agent: str, version: str, refund_to: str = "reply") -> AgentDefinition:
    """The support agent: the model thinks, calls the tool, thinks again, ... and answers."""
    nodes: dict[str, Any] = {
        "think": {
            "actionType": "llm",
            "prompt": 'customer={{input.customer}} tool={{stages.tool.summary.result | default("none")}}',
            "outputSchema": ANSWER,
            "timeout": "5s",
            "retry": {"maxAttempts": 3, "initialInterval": "100ms", "jitter": 0},
            "transitions": [
                {"when": 'stages.think.summary.action == "tool"', "to": "tool"},
                {"when": 'stages.think.summary.action == "refund"', "to": refund_to},
                {"to": "reply"},
            ],
        },
        "tool": {
            "actionType": "run_agent",
            "agent": "loop-tool",
            "input": "{{stages.think.outputUri}}",
            "next": "think",
        },
        "reply": {"actionType": "send_message", "parameters": {"message": "done"}},
    }
    if refund_to != "reply":
        nodes[refund_to] = {"actionType": "send_message", "parameters": {"message": "refund approved"}}
    return parse_definition(
        {"agent": agent, "version": version, "inputs": ["customer"], "start": "think", "nodes": nodes}
    )


def turn(customer: str, visit: int) -> str:
    """What the model is asked at a run's ``visit``-th turn (a marker the server answers by)."""
    return f"customer={customer} tool={'none' if visit == 1 else f'looked-up-{visit - 1}'}"


def answer(visit: int, final: str = "done", note: str | None = None) -> str:
    action = "tool" if visit < 3 else final
    return json.dumps({"action": action, "step": visit, **({"note": note} if note else {})})


def script(chat: ChatServer, customer: str, final: str = "done", **third: Any) -> None:
    """The model's three answers for ``customer``: tool, tool, then ``final``."""
    for visit in (1, 2, 3):
        reply = Reply(content=answer(visit, final, **(third if visit == 3 else {})))
        chat.scripts_for.setdefault(turn(customer, visit), deque()).append(reply)


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    server = ChatServer(content='{"action": "done", "step": 0}')
    server.start()
    yield server
    server.stop()


def in_process_worker(dsmo: DsmoClient, store: ArtifactStore, task_queue: str, outbox: Path, chat: ChatServer) -> Any:
    from dsmo.activities.llm_stage import LlmEndpoint

    return build_worker(
        dsmo.temporal,
        task_queue=task_queue,
        store=store,
        channel=FileChannel(outbox),
        registry=registry_with_loop_tool(),
        llm=LlmEndpoint(chat.url),
    )


@pytest_asyncio.fixture
async def loop_harness(
    dsmo: DsmoClient, store: ArtifactStore, tmp_path: Path, stack_settings: Settings, chat: ChatServer
) -> AsyncIterator[Harness]:
    task_queue = f"loop-{uuid.uuid4().hex[:10]}"
    async with in_process_worker(dsmo, store, task_queue, tmp_path / "outbox", chat):
        harness = Harness(dsmo, store, task_queue, tmp_path / "outbox", stack_settings)
        yield harness
    await harness.replay_all()


async def loop_worker(settings: Settings, chat: ChatServer, log: Path) -> subprocess.Popen[bytes]:
    """A worker process serving the loop's tool, its model at ``chat``."""
    env = {"DSMO_LLM_BASE_URL": chat.url, "DSMO_LOAD": "tests.loop_tool_plugin", "PYTHONPATH": str(REPO)}
    return await start_worker_process(settings, log, env)


def cli_replay(harness: Harness, run_id: str, *flags: str) -> dict[str, Any]:
    env = {**harness.cli_env(), "DSMO_LLM_BASE_URL": ""}  # the CLI itself never needs the endpoint
    done = subprocess.run(
        [str(BIN / "dsmo"), "replay", run_id, "--json", *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    report: dict[str, Any] = json.loads(done.stdout)
    harness.started.append(report["replay"])
    return report


async def test_a_loop_whose_model_call_lost_its_worker_replays_every_visit_with_no_model_call(
    dsmo: DsmoClient, store: ArtifactStore, stack_settings: Settings, chat: ChatServer, tmp_path: Path
) -> None:
    queue = f"loop-kill-{uuid.uuid4().hex[:8]}"
    settings = stack_settings.with_changes(temporal={"task_queue": queue}, worker={"metrics_bind": ""})
    definition = loop(f"loop-{uuid.uuid4().hex[:8]}", "1")
    customer = "c-kill"
    script(chat, customer)
    # The second turn's first call never gets its answer: the worker making it is killed meanwhile.
    chat.scripts_for[turn(customer, 2)].appendleft(Reply(content=answer(2), latency=600))
    log = tmp_path / "worker.log"
    process = await loop_worker(settings, chat, log)
    try:
        run_id = (await dsmo.start(definition, {"customer": customer}, task_queue=queue)).run_id
        deadline = time.monotonic() + 60
        while not any(turn(customer, 2) in json.dumps(request["messages"]) for request in chat.requests):
            assert time.monotonic() < deadline, log.read_text()
            await asyncio.sleep(0.1)
    finally:
        kill_worker(process)
    outbox = tmp_path / "outbox"
    async with in_process_worker(dsmo, store, queue, outbox, chat):
        harness = Harness(dsmo, store, queue, outbox, stack_settings, started=[run_id])
        result = await asyncio.wait_for(dsmo.result(run_id), 120)
        assert result.status is RunStatus.COMPLETED
        assert result.path == ["think", "tool", "think", "tool", "think", "reply"]
        events = await dsmo.events(run_id)
        think = [(e.type, e.attempt) for e in events if e.stage == "think" and e.type.startswith("STAGE_")]
        # Visit 2's first attempt lost its worker (timed out); its second committed.
        assert think.count(("STAGE_FAILED", 1)) == 1 and ("STAGE_SUCCEEDED", 2) in think, think
        second = [e for e in events if e.type == "STAGE_SUCCEEDED" and e.stage == "think"][1]
        assert "/think.v2/attempt=2/output.json" in second.artifact_uris[0]
        killed = second.artifact_uris[0].replace("attempt=2/output.json", "attempt=1/")
        assert store.list_uris(killed.removeprefix(f"s3://{store.bucket}/")) == []  # it recorded nothing
        calls = len(chat.requests)

        # The replay reads each visit's committed attempt: the same path, and no model is asked.
        report = await asyncio.to_thread(cli_replay, harness, run_id)
        assert report["samePath"] and report["replay_status"] == "completed", report
        assert report["problem"] is None
        assert len(chat.requests) == calls
        assert set(report["outputs"]) == {"think", "think.v2", "think.v3", "tool", "tool.v2"}
        assert all(before == after for before, after in report["outputs"].values()), report["outputs"]

        # --rerun-llm asks again; the third answer changed (a note), and only it is reported.
        script(chat, customer, note="a changed third answer")
        rerun = await asyncio.to_thread(cli_replay, harness, run_id, "--rerun-llm")
        assert len(chat.requests) == calls + 3
        assert rerun["samePath"]
        assert rerun["outputs"]["think.v3"][0] != rerun["outputs"]["think.v3"][1]
        assert rerun["outputs"]["think"][0] == rerun["outputs"]["think"][1]
        assert rerun["outputs"]["think.v2"][0] == rerun["outputs"]["think.v2"][1]
        assert rerun["answers"] == {"think.v3": ['note: (absent) -> "a changed third answer"']}
    await harness.replay_all()


async def test_what_if_over_20_looped_runs_names_exactly_the_runs_a_changed_transition_reroutes(
    loop_harness: Harness, chat: ChatServer
) -> None:
    dsmo, agent = loop_harness.dsmo, f"loop-{uuid.uuid4().hex[:8]}"
    v1 = loop(agent, "1")
    finals = {f"c{index}": "refund" if index % 4 == 0 else "done" for index in range(20)}
    runs: dict[str, str] = {}
    for customer, final in finals.items():
        script(chat, customer, final)
        runs[customer] = await loop_harness.start(v1, {"customer": customer})
    for run_id in runs.values():
        result = await asyncio.wait_for(dsmo.result(run_id), 120)
        assert result.status is RunStatus.COMPLETED and len(result.path) == 6, result
    query = f"AgentName = '{agent}'"

    async def listed_completed() -> bool:  # visibility is written asynchronously
        return (await dsmo.temporal.count_workflows(f"{query} AND ExecutionStatus = 'Completed'")).count == len(runs)

    await until(listed_completed, f"visibility lists the {len(runs)} runs as completed")
    calls = len(chat.requests)

    # Version 2 sends refunds for approval instead of answering at once: one transition changed.
    candidate = loop(agent, "2", refund_to="approve")
    report = await dsmo.what_if(query, candidate, task_queue=loop_harness.task_queue)
    loop_harness.started.extend(run.replay_id for run in report.runs)
    summary = report.summary()
    assert (summary["runs"], summary["errors"]) == (20, 0), report.to_json()
    rerouted = {runs[customer] for customer, final in finals.items() if final == "refund"}
    assert {run.run_id for run in report.runs if not run.same_path} == rerouted
    assert summary["byDivergence"] == {"after think: reply -> approve": len(rerouted)}
    assert all(run.problem is None for run in report.runs)
    assert len(chat.requests) == calls  # every visit's answer came from the record
    assert all(not loop_harness.messages(run.replay_id) for run in report.runs)  # nobody was sent anything
