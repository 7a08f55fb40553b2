"""Every change to a run is all-or-nothing: a cancel that lands while the run hands over to its
next generation (here: during a rewind's undo) ends it cancelled, its steps undone once
and its trail exported; a move asked while a run passes into its wait is answered at once; and a
run that is ending (its saga unwinding after a timeout) refuses every request with the reason.

Each race is made deterministic by holding one activity (a compensation, the request a wait sends
first) on a `threading.Event` until the test has placed its request."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from dsmo.activities.actions import ActionContext, ActionRegistry, FunctionAction
from dsmo.activities.audit_log import audit_key
from dsmo.activities.messaging import FileChannel
from dsmo.client.client_errors import EventNotAccepted, MigrationNotAccepted, RewindNotAccepted
from dsmo.client.definition_files import parse_definition_text
from dsmo.worker import build_worker
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import StatusView
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness
from tests.polling import until, until_value

pytestmark = pytest.mark.integration

# A hang guard for every answer a request gets, not a timing assertion: an answer that never
# comes fails here (it came in well under a second on this machine, measured, not asserted).
ANSWER_WITHIN = 60.0
CANCEL_REQUESTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
TASK_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED

LOCK = threading.Lock()
UNDONE: Counter[tuple[str, str]] = Counter()  # (run, step) -> times undone
HELD: dict[str, str] = {}  # "step": the step whose undo waits for RELEASE
HOLDING, RELEASE = threading.Event(), threading.Event()


def _do(data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
    return {"step": data["step"]}


def _undo(output: dict[str, Any], ctx: ActionContext) -> bool:
    if HELD.get("step") == output["step"] and not HOLDING.is_set():
        HOLDING.set()
        RELEASE.wait(120)  # a hang guard: the test releases it
    with LOCK:
        UNDONE[(ctx.run_id, output["step"])] += 1
    return True


@pytest.fixture
def actions() -> ActionRegistry:
    registry = ActionRegistry()
    registry.add(FunctionAction("held-step", _do, _undo))
    return registry


@pytest.fixture(autouse=True)
def _fresh_holds() -> Any:
    HOLDING.clear()
    RELEASE.clear()
    HELD.clear()
    yield
    RELEASE.set()  # never leave a worker thread held


def flow(
    agent: str, steps: list[str], *, version: str = "1", timeout: str = "1h", wait: str = "shipped"
) -> AgentDefinition:
    """Saga steps ``steps`` in order, then a wait for ``shipped`` that fails the run on its timeout."""
    nodes: dict[str, Any] = {
        step: {
            "actionType": "invoke",
            "action": "held-step",
            "input": {"step": step},
            "compensate": {"kind": "reversal"},
            "next": steps[index + 1] if index + 1 < len(steps) else wait,
        }
        for index, step in enumerate(steps)
    }
    nodes[wait] = {
        "actionType": "wait_for_event",
        "parameters": {"event": "shipped", "timeout": timeout, "onTimeout": "fail"},
    }
    return parse_definition({"agent": agent, "version": version, "start": steps[0], "nodes": nodes})


async def waiting_at(harness: Harness, run_id: str, node: str, workflow_version: str | None = None) -> None:
    def here(view: StatusView) -> bool:
        at = view.status is RunStatus.WAITING and view.current_node == node
        return at and workflow_version in (None, view.workflow_version)

    await until_value(lambda: harness.dsmo.status(run_id), here, f"{run_id} waits at {node}")


async def cancel_seen(harness: Harness, run_id: str) -> None:
    """Until the run has taken a workflow task after the cancel request (so it saw it)."""
    handle = harness.dsmo.temporal.get_workflow_handle(run_id)

    async def seen() -> bool:  # a workflow task follows within Temporal's task timeout
        kinds = [event.event_type async for event in handle.fetch_history_events()]
        return CANCEL_REQUESTED in kinds and TASK_COMPLETED in kinds[kinds.index(CANCEL_REQUESTED) :]

    await until(seen, "the run takes a workflow task after the cancel")


async def ended_cancelled_and_unwound(harness: Harness, run_id: str, steps: list[str]) -> list[Any]:
    """The run ended cancelled, each step undone exactly once, its trail exported; its trail."""
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.CANCELLED, result
    assert {step: UNDONE[(run_id, step)] for step in steps} == dict.fromkeys(steps, 1)
    assert harness.store.read_bytes(harness.store.uri(audit_key(run_id))), "no trail was exported"
    trail = await harness.dsmo.events(run_id)  # read from the export
    ends = [event for event in trail if event.type == "RUN_ABORTED"]
    assert [event.data["status"] for event in ends] == ["cancelled"], ends
    undone = [event.stage or "" for event in trail if event.type == "COMPENSATION_SUCCEEDED"]
    assert sorted(undone) == sorted(steps), undone  # each undo recorded once
    assert (await harness.dsmo.status(run_id)).status is RunStatus.CANCELLED
    return trail


async def test_a_cancel_during_a_rewinds_undo_ends_the_run_cancelled_with_every_step_undone_once(
    harness: Harness,
) -> None:
    dsmo, steps = harness.dsmo, ["s1", "s2", "s3"]
    run_id = await harness.start(flow(f"cancel-rewind-{uuid.uuid4().hex[:8]}", steps))
    await waiting_at(harness, run_id, "shipped")
    HELD["step"] = "s3"  # the rewind's undo of s3 is held
    rewind = asyncio.create_task(dsmo.rewind(run_id, "s3", reason="wrong amount"))
    assert await asyncio.to_thread(HOLDING.wait, 60), "the rewind never undid s3"
    await dsmo.cancel(run_id, reason="customer withdrew")
    await cancel_seen(harness, run_id)
    RELEASE.set()
    ack = await asyncio.wait_for(rewind, 60)
    assert ack.compensated == ["s3"]  # the undo the rewind began was finished and is answered
    trail = await ended_cancelled_and_unwound(harness, run_id, steps)
    kinds = [event.type for event in trail]
    assert "RUN_REWOUND" in kinds and "RUN_CONTINUED" not in kinds  # it never went back


class HeldRequests(FileChannel):
    """A file channel whose requests wait for ``release`` once ``sending`` is set."""

    def __init__(self, outbox: Path) -> None:
        super().__init__(outbox)
        self.sending, self.release = threading.Event(), threading.Event()

    def request(self, request: Any) -> Any:
        self.sending.set()
        self.release.wait(120)  # a hang guard: the test releases it
        return super().request(request)


DOCS = """
agent: {agent}
version: "{version}"
start: docs
nodes:
  docs:
    actionType: request_document
    parameters: {{documents: [id], to: ana@example.com, timeout: {timeout}, onTimeout: fail}}
"""


async def test_a_move_asked_while_a_run_passes_into_its_wait_is_made_from_inside_the_wait_at_once(
    harness: Harness, actions: ActionRegistry, tmp_path: Path
) -> None:
    dsmo, agent = harness.dsmo, f"move-into-wait-{uuid.uuid4().hex[:8]}"
    v1 = parse_definition_text(DOCS.format(agent=agent, version="1", timeout="1h"))
    v2 = parse_definition_text(DOCS.format(agent=agent, version="2", timeout="2h"))
    await dsmo.publish(v1)
    await dsmo.publish(v2)
    channel = HeldRequests(tmp_path / "outbox")
    queue = f"move-into-wait-{uuid.uuid4().hex[:8]}"
    worker = build_worker(dsmo.temporal, task_queue=queue, store=harness.store, channel=channel, actions=actions)
    try:
        async with worker:
            run_id = (await dsmo.start(v1, task_queue=queue)).run_id
            harness.started.append(run_id)
            # The run is at `docs`, sending its request: no node boundary lies between it and its wait.
            assert await asyncio.to_thread(channel.sending.wait, 60), "the request was never sent"
            move = asyncio.create_task(dsmo.migrate_run(run_id, v2, reason="longer wait"))
            await asyncio.sleep(0)  # the update is on its way before the request is let go
            channel.release.set()
            ack = await asyncio.wait_for(move, ANSWER_WITHIN)
            assert (ack.from_node, ack.to_node, ack.waiting) == ("docs", "docs", True)
            await waiting_at(harness, run_id, "docs", v2.workflow_version)
            trail = await dsmo.events(run_id, live=True)
            await dsmo.cancel(run_id, reason="done")
            await dsmo.result(run_id)
    finally:
        channel.release.set()
    kinds = [event.type for event in trail]
    assert kinds.count("RUN_MIGRATED") == 1 and kinds.index("RUN_WAITING") < kinds.index("RUN_MIGRATED")


async def test_a_reply_and_a_rewind_asked_while_a_run_passes_into_its_wait_are_each_answered(
    harness: Harness, actions: ActionRegistry, tmp_path: Path
) -> None:
    dsmo = harness.dsmo
    v1 = parse_definition_text(DOCS.format(agent=f"into-wait-{uuid.uuid4().hex[:8]}", version="1", timeout="1h"))
    channel = HeldRequests(tmp_path / "outbox")
    queue = f"into-wait-{uuid.uuid4().hex[:8]}"
    worker = build_worker(dsmo.temporal, task_queue=queue, store=harness.store, channel=channel, actions=actions)
    try:
        async with worker:
            run_id = (await dsmo.start(v1, task_queue=queue)).run_id
            harness.started.append(run_id)
            assert await asyncio.to_thread(channel.sending.wait, 60), "the request was never sent"
            with pytest.raises(RewindNotAccepted) as refused:  # not waiting yet: refused, with the reason
                await asyncio.wait_for(dsmo.rewind(run_id, "docs", reason="again"), ANSWER_WITHIN)
            assert str(refused.value).endswith("a run goes back only while it waits"), str(refused.value)
            reply = {"document": "id", "url": "s3://docs/id.pdf"}
            ack = await asyncio.wait_for(dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", reply), ANSWER_WITHIN)
            assert ack.accepted and ack.buffered, ack  # kept for the wait the run is entering
            channel.release.set()
            result = await dsmo.result(run_id)
    finally:
        channel.release.set()
    assert result.status is RunStatus.COMPLETED, result
    kinds = [event.type for event in await dsmo.events(run_id)]
    assert kinds.count("EVENT_CONSUMED") == 1 and "RUN_REWOUND" not in kinds, kinds


async def test_a_run_ending_on_its_timeout_refuses_every_request_while_its_saga_unwinds(harness: Harness) -> None:
    dsmo, agent = harness.dsmo, f"ending-{uuid.uuid4().hex[:8]}"
    v1 = flow(agent, ["s1"], timeout="1s")
    v2 = flow(agent, ["s1"], version="2", timeout="1h")
    await dsmo.publish(v1)
    await dsmo.publish(v2)
    HELD["step"] = "s1"  # the timeout's undo of s1 is held
    run_id = await harness.start(v1)
    assert await asyncio.to_thread(HOLDING.wait, 60), "the wait never timed out"
    view = await dsmo.status(run_id)
    assert view.status is RunStatus.RUNNING and view.waiting_for is None, view  # it says it left its wait
    asks = [
        (RewindNotAccepted, dsmo.rewind(run_id, "shipped", reason="again")),
        (MigrationNotAccepted, dsmo.migrate_run(run_id, v2, reason="longer wait")),
        (EventNotAccepted, dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "shipped"})),
    ]
    for error, ask in asks:
        with pytest.raises(error) as refused:
            await asyncio.wait_for(ask, ANSWER_WITHIN)
        message = str(refused.value)
        assert "the run is ending (timeout)" in message and "\n" not in message, message
    RELEASE.set()
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.TIMEOUT and UNDONE[(run_id, "s1")] == 1
    kinds = [event.type for event in await dsmo.events(run_id)]
    assert not {"RUN_REWOUND", "RUN_MIGRATED", "RUN_RESUMED"} & set(kinds), kinds


async def test_a_fork_asked_during_a_rewinds_undo_is_refused_with_the_reason_and_works_once_the_run_is_back(
    harness: Harness,
) -> None:
    dsmo, steps = harness.dsmo, ["s1", "s2", "s3"]
    run_id = await harness.start(flow(f"fork-rewind-{uuid.uuid4().hex[:8]}", steps))
    await waiting_at(harness, run_id, "shipped")
    HELD["step"] = "s3"
    rewind = asyncio.create_task(dsmo.rewind(run_id, "s3", reason="wrong amount"))
    assert await asyncio.to_thread(HOLDING.wait, 60), "the rewind never undid s3"
    with pytest.raises(DsmoError) as refused:
        await asyncio.wait_for(dsmo.fork(run_id, "s2", task_queue=harness.task_queue), ANSWER_WITHIN)
    assert str(refused.value) == (
        f"--from: run {run_id} is going back to 's3' (a rewind is under way); fork it once it is there"
    )
    assert await dsmo.forks(run_id) == []  # nothing was started
    RELEASE.set()
    assert (await asyncio.wait_for(rewind, 60)).compensated == ["s3"]
    await waiting_at(harness, run_id, "shipped")
    fork_id = await dsmo.fork(run_id, "s2", task_queue=harness.task_queue)
    harness.started.append(fork_id)
    await waiting_at(harness, fork_id, "shipped")
