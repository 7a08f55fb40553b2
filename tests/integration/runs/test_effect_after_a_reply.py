"""A reply that resumes a run, whose next stage (short, so local) has an outside effect, and whose
worker is SIGKILLed after the effect and before its workflow task is recorded.

Temporal records an update only when the workflow task that took it completes. Had the stage run
inside that task, its effect would have gone out on a decision the server never recorded: the
next worker would find the wait's timeout due and send again down the other branch, under
another key. The run records the reply before such a stage starts, so the stage's effect is made
under one key, on the branch the reply chose.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path

import pytest

from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import REPO
from tests.worker_processes import kill_worker, start_worker_process, until

pytestmark = pytest.mark.integration


def replied_send(agent: str) -> dict[str, object]:
    send = {"actionType": "run_agent", "agent": "effect-send", "timeout": "5s"}
    return {
        "agent": agent,
        "start": "reply",
        "nodes": {
            "reply": {
                "actionType": "wait_for_response",
                "parameters": {"timeout": "30s"},
                "transitions": [{"when": "lastResponse == 'ok'", "to": "send"}, {"to": "send_timeout"}],
            },
            "send": send,
            "send_timeout": send,
        },
    }


def effect_worker_env(ledger: Path) -> dict[str, str]:
    """A worker process's environment: it serves `effect-send` (the agent stays out of this process's registry)."""
    return {"DSMO_LOAD": "tests.effect_stage_plugin", "PYTHONPATH": str(REPO), "EFFECT_LEDGER_DIR": str(ledger)}


async def test_a_reply_then_a_local_effect_whose_worker_dies_keeps_the_reply_branch_and_one_key(
    dsmo: DsmoClient, stack_settings: Settings, tmp_path: Path
) -> None:
    queue = f"effect-{uuid.uuid4().hex[:8]}"
    settings = stack_settings.with_changes(temporal={"task_queue": queue}, worker={"metrics_bind": ""})
    ledger, log = tmp_path / "ledger", tmp_path / "worker.log"
    ledger.mkdir()
    (ledger / "hold").write_text("")
    env = effect_worker_env(ledger)
    definition = parse_definition(replied_send(f"effect-{uuid.uuid4().hex[:6]}"))

    first = await start_worker_process(settings, log, env)
    try:
        run_id = (await dsmo.start(definition, {"order": 1}, task_queue=queue)).run_id
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING}, timeout=60)
        answer = asyncio.create_task(dsmo.respond(run_id, "ok", event_id=f"{run_id}-reply"))
        await until((ledger / "effect-sent").exists, log, "the effect")
    finally:
        kill_worker(first)
    answer.cancel()  # its caller goes too (a webhook's sender that timed out, an ingress that died)
    with contextlib.suppress(asyncio.CancelledError):
        await answer
    (ledger / "hold").unlink()
    second = await start_worker_process(settings, log, env)
    try:
        result = await asyncio.wait_for(dsmo.result(run_id), 120)
    finally:
        kill_worker(second)
    # One key, the reply branch's: the attempt the dead worker began and the one after it.
    entries = {path.name: path.read_text() for path in ledger.glob("effect-*") if path.name != "effect-sent"}
    assert result.status is RunStatus.COMPLETED and result.path == ["reply", "send"], result
    assert list(entries.values()) == ["attempt 1\nattempt 2\n"], entries
    (name,) = entries
    assert name.startswith("effect-send-"), name
    # The reply was in the history before the stage was scheduled: its first attempt a regular
    # activity, not a local one run inside the task that took the reply. The second, in a later
    # task, ran locally.
    history = await dsmo.temporal.get_workflow_handle(run_id).fetch_history()
    accepted = [e.event_id for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes")]
    stages = [
        e.event_id
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "run_stage"
    ]
    assert len(accepted) == 1 and len(stages) == 1 and accepted[0] < stages[0], (accepted, stages)


async def test_a_reply_kept_in_the_first_task_leaves_the_stages_before_its_wait_local(
    dsmo: DsmoClient, stack_settings: Settings, tmp_path: Path
) -> None:
    # The start carries the reply: the first workflow task takes both. The stages before the wait
    # decide nothing on the reply (it is kept for the wait), so they stay local; the send, after
    # the wait took the reply in that same task, does not.
    queue = f"effect-kept-{uuid.uuid4().hex[:8]}"
    settings = stack_settings.with_changes(temporal={"task_queue": queue}, worker={"metrics_bind": ""})
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    document = replied_send(f"effect-kept-{uuid.uuid4().hex[:6]}")
    nodes = document["nodes"]
    assert isinstance(nodes, dict)
    document["start"] = "prepare"
    nodes["prepare"] = {"actionType": "run_agent", "agent": "effect-send", "timeout": "5s", "next": "check"}
    nodes["check"] = {"actionType": "run_agent", "agent": "effect-send", "timeout": "5s", "next": "reply"}
    reply = [{"type": "MESSAGE_RECEIVED", "data": {"text": "ok"}}]
    worker = await start_worker_process(settings, tmp_path / "worker.log", effect_worker_env(ledger))
    try:
        run_id = (await dsmo.start(parse_definition(document), {"order": 2}, task_queue=queue, events=reply)).run_id
        result = await asyncio.wait_for(dsmo.result(run_id), 60)
    finally:
        kill_worker(worker)
    assert result.status is RunStatus.COMPLETED and result.path == ["prepare", "check", "reply", "send"], result
    events = (await dsmo.temporal.get_workflow_handle(run_id).fetch_history()).events
    tasks = [e.event_id for e in events if e.HasField("workflow_task_completed_event_attributes")]
    accepted = next(e.event_id for e in events if e.HasField("workflow_execution_update_accepted_event_attributes"))
    assert accepted == tasks[0] + 1, "the first workflow task took the reply"
    stages = [
        e.event_id
        for e in events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "run_stage"
    ]
    assert len(stages) == 1 and tasks[0] < stages[0] < tasks[1], (tasks, stages)  # the send
    assert sorted(path.name.split("-")[1] for path in ledger.glob("effect-*")) == ["check", "prepare", "send"]
