"""Key locks share shards: a leaked slot is still freed while other keys keep its shard busy, a
run that ends in line leaves it, and a busy shard neither ends nor arms a timer per wake-up."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker

from dsmo.client.definition_files import parse_definition_text
from dsmo.client.places_in_line import key_line
from dsmo.workflows.common.sandbox import sandbox_runner
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.flow_control import lock_id, shard_of
from dsmo.workflows.flow.key_locks import KeyLocks, KeyLocksState
from tests.conftest import Harness, start_time_skipping
from tests.integration.flow.test_flow_control import FLOW, _client, _flow, _input, _status, quick_holder_checks
from tests.polling import until

pytestmark = pytest.mark.asyncio
__all__ = ["quick_holder_checks"]  # autouse: the test's worker checks holders every second


def _same_shard(agent: str, task_queue: str, count: int) -> list[str]:
    """``count`` conversation ids whose lines live in one shard."""
    by_shard: dict[str, list[str]] = {}
    for index in range(10_000):
        conversation = f"c-{uuid.uuid4().hex[:6]}-{index}"
        found = by_shard.setdefault(shard_of(lock_id(agent, conversation, task_queue))[0], [])
        found.append(conversation)
        if len(found) == count:
            return found
    raise AssertionError("no shard took enough keys")


async def test_a_terminated_holder_is_found_while_the_shard_s_other_keys_keep_it_busy(harness: Harness) -> None:
    dsmo, flow = _client(harness), _flow()
    leaked, churning = _same_shard(flow.agent, harness.task_queue, 2)
    shard, churn_line = shard_of(lock_id(flow.agent, churning, harness.task_queue))
    assert churn_line is not None
    holder = (await dsmo.start(flow, _input(leaked), task_queue=harness.task_queue)).run_id
    await _status(harness, holder, RunStatus.WAITING)
    # Another key of the shard takes and gives back a slot many times a second from here on: the
    # shard wakes far more often than it checks its holders, and the check must still come.
    churning_on, churns = asyncio.Event(), [0]
    churn = asyncio.create_task(_churn(harness, shard, churn_line, churning, churning_on, churns))
    queued = (await dsmo.start(flow, _input(leaked), task_queue=harness.task_queue)).run_id
    harness.started.append(queued)
    await _status(harness, queued, RunStatus.PENDING)
    await until(lambda: churns[0] >= 5, "the churn under way before the holder goes", pause=0.05)
    await harness.dsmo.temporal.get_workflow_handle(holder).terminate(reason="outside DSMO")
    await _status(harness, queued, RunStatus.WAITING)
    assert not churn.done()  # the churn went on until the check freed the slot
    churning_on.set()
    await churn
    line = await key_line(dsmo.temporal, lock_id(flow.agent, leaked, harness.task_queue))
    assert line is not None and line.holders == [queued] and line.queue == []
    await dsmo.cancel(queued, reason="done")


async def _churn(harness: Harness, shard: str, line: str, key: str, stop: asyncio.Event, churns: list[int]) -> None:
    handle = harness.dsmo.temporal.get_workflow_handle(shard)
    while not stop.is_set():
        ask = {"run_id": f"churn-{churns[0]}", "line": line, "key": key, "max_concurrent": 1}
        assert (await handle.execute_update("claim", ask)).get("admitted") is True
        await handle.signal("release", {"run_id": ask["run_id"], "line": line})
        churns[0] += 1
        await asyncio.sleep(0.05)


async def test_a_run_cancelled_in_line_leaves_the_line_at_once(harness: Harness) -> None:
    dsmo, flow = _client(harness), _flow()
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    holder = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    harness.started.append(holder)
    await _status(harness, holder, RunStatus.WAITING)
    queued = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    await _status(harness, queued, RunStatus.PENDING)
    await dsmo.cancel(queued, reason="not needed")
    assert (await dsmo.result(queued)).status is RunStatus.CANCELLED
    lock = lock_id(flow.agent, conversation, harness.task_queue)
    line = await key_line(dsmo.temporal, lock)
    assert line is not None and line.holders == [holder] and line.queue == []
    await dsmo.cancel(holder, reason="done")
    # `dsmo verify` replays a key lock's history on this code too.
    assert await dsmo.verify_history(shard_of(lock)[0]) is None


async def test_a_busy_shard_keeps_one_timer_and_ends_a_minute_after_its_last_line_emptied() -> None:
    """On the time-skipping server: a key taken and given back every 5 s for 150 s never leaves
    the shard idle a minute, and costs no timer per wake-up; a minute after the last release, it ends."""
    queue = f"shard-{uuid.uuid4().hex[:8]}"
    env = await start_time_skipping()
    try:
        async with Worker(env.client, task_queue=queue, workflows=[KeyLocks], workflow_runner=sandbox_runner()):
            handle = await env.client.start_workflow(
                KeyLocks.run, KeyLocksState(owner="shard"), id=f"dsmo-keys.shard.{queue}.00", task_queue=queue
            )
            for turn in range(30):
                ask = {"run_id": f"r-{turn}", "line": "a", "key": "a", "max_concurrent": 1}
                assert (await handle.execute_update("claim", ask)).get("admitted") is True
                await handle.signal("release", {"run_id": f"r-{turn}", "line": "a"})
                await env.sleep(timedelta(seconds=5))
            assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
            await env.sleep(timedelta(seconds=70))
            assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
            history = await handle.fetch_history()
    finally:
        await env.shutdown()
    kinds = [event.event_type for event in history.events]
    assert kinds.count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED) == 30
    assert kinds.count(EventType.EVENT_TYPE_TIMER_STARTED) <= 5  # 60 wake-ups; a timer a minute at most


async def test_a_run_nobody_waits_for_ends_without_a_word_to_its_lock_and_the_next_start_runs(harness: Harness) -> None:
    dsmo, flow = _client(harness), _flow()
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    first = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    await _status(harness, first, RunStatus.WAITING)
    await dsmo.respond(first, "ok")
    assert (await dsmo.result(first)).status is RunStatus.COMPLETED
    history = await harness.dsmo.temporal.get_workflow_handle(first).fetch_history()
    signalled = EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED
    assert not [event for event in history.events if event.event_type == signalled]
    # The next message of the conversation: the lock asks the old holder, finds it ended, admits.
    second = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).started
    harness.started.append(second.run_id)
    assert second.status == "running"
    line = await key_line(dsmo.temporal, lock_id(flow.agent, conversation, harness.task_queue))
    assert line is not None and line.holders == [second.run_id]
    await dsmo.cancel(second.run_id, reason="done")


async def test_the_line_of_a_holder_that_ended_unasked_is_forgotten_at_the_next_check(harness: Harness) -> None:
    dsmo, flow = _client(harness), _flow()
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    run = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    await _status(harness, run, RunStatus.WAITING)
    lock = lock_id(flow.agent, conversation, harness.task_queue)
    assert (line := await key_line(dsmo.temporal, lock)) is not None and line.holders == [run]
    await dsmo.respond(run, "ok")
    await dsmo.result(run)
    await until(lambda: _no_line(dsmo.temporal, lock), "the key's line gone")  # the lock checks every second here


async def test_a_run_of_a_key_with_many_slots_gives_its_slot_back_as_it_ends(harness: Harness) -> None:
    """Above ten slots a line would carry many holders that ended until its next check: such a
    run gives its slot back as it ends, though nobody waits."""
    dsmo = _client(harness)
    flow = parse_definition_text(
        FLOW.format(agent=f"flow-{uuid.uuid4().hex[:8]}", extra="").replace("limit: 1", "limit: 20")
    )
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    run = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    await _status(harness, run, RunStatus.WAITING)
    await dsmo.respond(run, "ok")
    await dsmo.result(run)
    history = await harness.dsmo.temporal.get_workflow_handle(run).fetch_history()
    signalled = EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED
    assert len([event for event in history.events if event.event_type == signalled]) == 1
    # The release reaches the lock a moment after the run ends.
    lock = lock_id(flow.agent, conversation, harness.task_queue)
    await until(lambda: _no_line(dsmo.temporal, lock), "the key's line gone")


async def _no_line(temporal: Client, lock: str) -> bool:
    return await key_line(temporal, lock) is None
