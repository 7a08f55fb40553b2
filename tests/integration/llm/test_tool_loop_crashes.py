"""A tool-using run whose worker is SIGKILLed twice: during its second model call, and after the
refund was applied but before the call's result was recorded (and another killed while a refund
waits for a person's approval). The run completes on another
worker; the order service's ledger shows one refund; no committed model turn is asked again; the
retried call is in the trail as an attempt; and the replay asks and calls nothing. The node keeps
its default timeouts (2 minutes a model call, 30 seconds a tool call): the calls heartbeat, so each
dead worker is noticed within seconds."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections import deque
from pathlib import Path

import pytest

import tests.support_tools_plugin  # noqa: F401 - registers the tools for the in-process worker
from bench.llm_server import ChatServer, Reply
from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.llm_stage import LlmEndpoint
from dsmo.activities.messaging import FileChannel
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import REPO, Harness
from tests.integration.llm.support_agent import TICKET, support
from tests.worker_processes import kill_worker, start_worker_process, until

pytestmark = pytest.mark.integration

FINAL = json.dumps({"reply": "Refunded 42.50 for A-1"})


async def tools_worker(settings: Settings, chat: ChatServer, ledger: Path, log: Path) -> subprocess.Popen[bytes]:
    """A worker process serving the support tools over the ledger, its model at ``chat``."""
    env = {"DSMO_LLM_BASE_URL": chat.url, "DSMO_LOAD": "tests.support_tools_plugin", "PYTHONPATH": str(REPO)}
    return await start_worker_process(settings, log, {**env, "SUPPORT_LEDGER_DIR": str(ledger)})


async def test_a_tool_run_survives_two_worker_kills_applies_one_refund_and_replays_with_no_calls(
    dsmo: DsmoClient,
    store: ArtifactStore,
    stack_settings: Settings,
    chat: ChatServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queue = f"tools-kill-{uuid.uuid4().hex[:8]}"
    settings = stack_settings.with_changes(temporal={"task_queue": queue}, worker={"metrics_bind": ""})
    ledger, log = tmp_path / "ledger", tmp_path / "worker.log"
    ledger.mkdir()
    monkeypatch.setenv("SUPPORT_LEDGER_DIR", str(ledger))
    # A turn is told apart by what the model has been told so far: the refund's result, the
    # lookup's, or nothing yet. The second turn's first answer never comes: its worker is killed.
    chat.scripts_for['\\"refunded\\"'] = deque([Reply(content=FINAL)])
    chat.scripts_for['\\"delivered\\"'] = deque(
        [
            Reply(tool_calls=[("refund", {"order": "A-1", "amount": 42.5})], latency=600),
            Reply(tool_calls=[("refund", {"order": "A-1", "amount": 42.5})]),
        ]
    )
    chat.reply(Reply(tool_calls=[("lookup_order", {"order": "A-1"})]))
    definition = parse_definition(support(f"support-{uuid.uuid4().hex[:6]}", retry={"maxAttempts": 3}))

    first = await tools_worker(settings, chat, ledger, log)
    try:
        run_id = (await dsmo.start(definition, TICKET, task_queue=queue)).run_id
        await until(lambda: len(chat.requests) == 2, log, "the second model call")
    finally:
        kill_worker(first)  # during the second model call
    (ledger / "pause-after-refund").write_text("")
    second = await tools_worker(settings, chat, ledger, log)
    try:
        await until((ledger / "refund-applied").exists, log, "the refund")
    finally:
        kill_worker(second)  # the refund is applied, its result not yet recorded
    (ledger / "pause-after-refund").unlink()

    outbox = tmp_path / "outbox"
    worker = build_worker(
        dsmo.temporal, task_queue=queue, store=store, channel=FileChannel(outbox), llm=LlmEndpoint(chat.url)
    )
    async with worker:
        harness = Harness(dsmo, store, queue, outbox, stack_settings, started=[run_id])
        result = await asyncio.wait_for(dsmo.result(run_id), 120)
        assert result.status is RunStatus.COMPLETED and result.path == ["think", "answer"], result
        assert [path.name for path in ledger.glob("refund-*.json")] == [f"refund-tool_{run_id}_think.v2_1.json"]

        # The first turn was committed before either kill: it was asked once. The second turn's
        # lost call was asked again (it never committed), then the third.
        told = [[m["role"] for m in request["messages"]] for request in chat.requests]
        assert told.count(["system", "user"]) == 1, told
        assert len(chat.requests) == 4
        events = await dsmo.events(run_id)
        refund = next(e for e in events if e.type == "TOOL_CALLED" and e.data["tool"] == "refund")
        assert refund.data["attempts"] == 2 and refund.data["ok"], refund.data
        think = [(e.type, e.attempt) for e in events if e.stage == "think" and e.type.startswith("STAGE_F")]
        assert think == [("STAGE_FAILED", 1)], think  # the second turn's first attempt lost its worker

        report = await dsmo.replay(run_id, task_queue=queue)
        harness.started.append(report.replay)
        assert report.replay_path == ["think", "answer"] and report.problem is None, report
        assert len(chat.requests) == 4 and len(list(ledger.glob("refund-*.json"))) == 1
    await harness.replay_all()


async def test_a_worker_killed_while_a_refund_waits_for_approval_loses_nothing(
    dsmo: DsmoClient,
    store: ArtifactStore,
    stack_settings: Settings,
    chat: ChatServer,
    tmp_path: Path,
) -> None:
    queue = f"tools-wait-{uuid.uuid4().hex[:8]}"
    settings = stack_settings.with_changes(temporal={"task_queue": queue}, worker={"metrics_bind": ""})
    ledger, log = tmp_path / "ledger", tmp_path / "worker.log"
    ledger.mkdir()
    chat.reply(
        Reply(tool_calls=[("lookup_order", {"order": "B-7"})]),
        Reply(tool_calls=[("refund", {"order": "B-7", "amount": 120})]),
        Reply(content=json.dumps({"reply": "Refunded 120.00"})),
    )
    definition = parse_definition(support(f"support-{uuid.uuid4().hex[:6]}"))
    first = await tools_worker(settings, chat, ledger, log)
    try:
        ticket = {"ticket": {"text": "broken TV", "order": "B-7"}}
        run_id = (await dsmo.start(definition, ticket, task_queue=queue)).run_id
        view = await dsmo.run(run_id).wait_for_status({RunStatus.WAITING}, timeout=60)
        assert view.waiting_for == "approval"
    finally:
        kill_worker(first)  # while the refund waits for a person
    assert list(ledger.glob("refund-*.json")) == []
    # A new worker takes the run up from its history, still waiting; the decision reaches it there.
    second = await tools_worker(settings, chat, ledger, log)
    try:
        await dsmo.run(run_id).decide("approve", by="ana")
        result = await asyncio.wait_for(dsmo.result(run_id), 120)
    finally:
        kill_worker(second)
    assert result.status is RunStatus.COMPLETED and result.path == ["think", "answer"], result
    assert [path.name for path in ledger.glob("refund-*.json")] == [f"refund-tool_{run_id}_think.v2_1.json"]
    assert len(chat.requests) == 3  # no committed turn was asked again
    decided = [e.data["by"] for e in await dsmo.events(run_id) if e.type == "TOOL_DECIDED"]
    assert decided == ["ana"]

    # The replay takes the decision from the record: it asks no one, no model and no tool.
    outbox = tmp_path / "outbox"
    replayer = build_worker(
        dsmo.temporal, task_queue=queue, store=store, channel=FileChannel(outbox), llm=LlmEndpoint(chat.url)
    )
    async with replayer:
        harness = Harness(dsmo, store, queue, outbox, stack_settings, started=[run_id])
        report = await dsmo.replay(run_id, task_queue=queue)
        harness.started.append(report.replay)
        assert report.replay_path == ["think", "answer"] and report.problem is None, report
        assert len(chat.requests) == 3 and len(list(ledger.glob("refund-*.json"))) == 1
    await harness.replay_all()
