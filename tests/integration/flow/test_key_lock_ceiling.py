"""A run already started that asks for a key's slot when its lock's shard is past its ceiling is
told, and ends FAILED saying why: it never waits unanswered, and the shard goes on serving."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.flow_control import lock_id, shard_of
from dsmo.workflows.flow.key_lines import SHARD_CEILING, carried_bytes, entry_bytes
from dsmo.workflows.flow.key_locks import KeyLocks, KeyLocksState
from tests.conftest import Harness
from tests.integration.flow.test_flow_control import _client, _flow, _input, _status, quick_holder_checks
from tests.integration.flow.test_payload_limits import _claims, assert_no_failed_task

pytestmark = pytest.mark.asyncio
__all__ = ["quick_holder_checks"]  # autouse: the test's worker checks holders every second

ROOM = 200  # what the run's own entry may take: its id is a uuid (entry_bytes of 45 characters)


async def _fill_to_ceiling(harness: Harness, shard: str, line: str) -> int:
    """Put fake runs in ``line`` (eleven holders claimed, the rest lined up with `acquire` as a
    run's activity does) until the shard carries within `ROOM` bytes of its ceiling; what it carries."""
    handle = harness.dsmo.temporal.get_workflow_handle(shard)
    holders = [f"h{index:02d}-" + "x" * 996 for index in range(11)]
    assert all(answer["admitted"] for answer in await _claims(harness, shard, line, holders))
    carried, index = 0, 0
    for _ in range(20):  # a hang guard: each round fills what is left, in long ids then a short one
        carried = carried_bytes((await handle.query("snapshot", result_type=KeyLocksState)).lines)
        gap = SHARD_CEILING - carried
        if gap <= ROOM:
            return carried
        count = max(1, (gap - 3_100) // entry_bytes("q" * 1_000))
        sizes = [1_000] * count if gap > 3_100 else [max(1, (gap - 64) // 3 - 8)]
        runs = [f"q{(index := index + 1):05d}-" + "y" * (size - 7) for size in sizes]
        for at in range(0, len(runs), 25):
            asks = ({"run_id": run, "line": line, "max_concurrent": 11} for run in runs[at : at + 25])
            await asyncio.gather(*(handle.signal("acquire", ask) for ask in asks))
    raise AssertionError(f"the shard never came within {ROOM} bytes of its ceiling: {carried}")


async def test_a_delayed_start_past_its_shard_s_ceiling_fails_saying_its_key_s_line_is_full(harness: Harness) -> None:
    dsmo, flow = _client(harness), _flow()
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    shard, _ = shard_of(lock_id(flow.agent, conversation, harness.task_queue))
    temporal = harness.dsmo.temporal
    await temporal.start_workflow(
        KeyLocks.run, KeyLocksState(owner=flow.agent), id=shard, task_queue=harness.task_queue
    )
    try:
        carried = await _fill_to_ceiling(harness, shard, f"other-{uuid.uuid4().hex[:6]}")
        assert carried <= SHARD_CEILING
        # A delayed start claims nothing: the run asks for its slot when its delay is over.
        run_id = (
            await dsmo.start(
                flow, _input(conversation), task_queue=harness.task_queue, start_delay=timedelta(seconds=1)
            )
        ).run_id
        view = await _status(harness, run_id, RunStatus.FAILED)
        assert view.error_message is not None
        assert view.error_message.startswith("flow control: the line of "), view.error_message
        assert "is full: its lock shard already carries" in view.error_message
        assert f"(at most {SHARD_CEILING:,})" in view.error_message
        result = await dsmo.result(run_id)
        assert result.status is RunStatus.FAILED and result.error_message == view.error_message
        events = await dsmo.events(run_id)
        refused = [event for event in events if event.type == "SLOT_REFUSED"]
        assert len(refused) == 1 and refused[0].data["reason"] in view.error_message, events
        assert refused[0].data["key"].startswith("conversation.id=")
        assert not [event for event in events if event.type == "SLOT_TAKEN"]
        # The shard still serves: a key value with a free slot is admitted, and no task failed.
        fresh = await temporal.get_workflow_handle(shard).execute_update(
            "claim", {"run_id": "fresh", "line": f"free-{uuid.uuid4().hex[:6]}", "max_concurrent": 1}
        )
        assert fresh["admitted"] is True
        await assert_no_failed_task(temporal, shard)
        await assert_no_failed_task(temporal, run_id)
        assert await dsmo.verify_history(shard) is None
    finally:
        await temporal.get_workflow_handle(shard).terminate(reason="test done")
