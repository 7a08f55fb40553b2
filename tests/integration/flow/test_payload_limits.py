"""What flow control's helper workflows and a move carry stays under Temporal's payload limit.

A key value's line refuses a starter's claim beyond its limit (and its shard beyond its byte
budget), a debounce batch closes at its count and at its byte budget, and a move whose
hand-over would be too large is refused before anything is written. No workflow task fails on
the way: each test scans the histories for a failed task.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from dsmo.client.client_errors import InvalidInputDocument, KeyBusy, MigrationNotAccepted
from dsmo.client.debounced_starts import debouncer_id
from dsmo.client.definition_files import parse_definition_text
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.migration_io import HANDOVER_LIMIT
from dsmo.workflows.definition.flow_control import lock_id, shard_of
from dsmo.workflows.flow.debouncer import BATCH_BYTES
from dsmo.workflows.flow.key_lines import LINE_LIMIT, SHARD_BUDGET
from dsmo.workflows.flow.key_locks import KeyLocks, KeyLocksState
from tests.conftest import Harness
from tests.integration.changes.test_migration import V1, _agent, _published
from tests.integration.flow.test_flow_control import (
    DEBOUNCED,
    _client,
    _flow,
    _input,
    _result_once_started,
    _status,
    quick_holder_checks,
)
from tests.polling import until_value

pytestmark = pytest.mark.asyncio
__all__ = ["quick_holder_checks"]  # autouse: the test's worker checks holders every second


async def assert_no_failed_task(temporal: Client, workflow_id: str) -> None:
    """Every run of ``workflow_id`` (back along its continue-as-new chain): no workflow task failed."""
    run_id: str | None = None
    for _ in range(200):  # a hang guard: a chain this test makes is far shorter
        history = await temporal.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        failed = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]
        assert not failed, f"{workflow_id}: {failed[0].workflow_task_failed_event_attributes}"
        started = history.events[0].workflow_execution_started_event_attributes
        run_id = started.continued_execution_run_id or None
        if run_id is None:
            return
    raise AssertionError(f"{workflow_id}: the chain of runs never began")


async def _claims(harness: Harness, shard: str, line: str, run_ids: list[str]) -> list[dict[str, Any]]:
    """Claim a slot of ``line`` for each run (in line, in order), a few at once as starters would."""
    handle = harness.dsmo.temporal.get_workflow_handle(shard)
    answers: list[dict[str, Any]] = []
    for at in range(0, len(run_ids), 8):
        # Eleven slots: a key whose runs give their slot back, so a full line needs no holder told.
        asks = [
            {"run_id": run_id, "line": line, "queue": True, "max_concurrent": 11} for run_id in run_ids[at : at + 8]
        ]
        answers.extend(await asyncio.gather(*(handle.execute_update("claim", ask) for ask in asks)))
    return answers


async def test_a_long_line_is_refused_at_its_limit_and_its_shard_keeps_serving(harness: Harness) -> None:
    dsmo, flow = _client(harness), _flow()
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    shard, line = shard_of(lock_id(flow.agent, conversation, harness.task_queue))
    assert line is not None
    temporal = harness.dsmo.temporal
    await temporal.start_workflow(
        KeyLocks.run, KeyLocksState(owner=flow.agent), id=shard, task_queue=harness.task_queue
    )
    try:
        # Eleven holders and LINE_LIMIT runs in line (long ids: the carried state grows fast).
        queued = [f"r{index:05d}-" + "x" * 194 for index in range(LINE_LIMIT + 11)]
        answers = await _claims(harness, shard, line, queued[:11]) + await _claims(harness, shard, line, queued[11:])
        assert all(answer["admitted"] for answer in answers[:11])
        assert all(not answer["admitted"] and not answer.get("refused") for answer in answers[11:])
        # One more, by a starter: refused with the reason, nothing started.
        with pytest.raises(KeyBusy, match=rf"^concurrency\.0: .*: 1000 runs already wait .*at most {LINE_LIMIT:,}"):
            await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)
        # Other key values of the shard fill it up to its byte budget, then are refused too.
        other = f"other-{uuid.uuid4().hex[:6]}"
        big = [f"b{index:05d}-" + "y" * 994 for index in range(SHARD_BUDGET // 3_000)]
        answers = await _claims(harness, shard, other, big)
        refused = [answer["refused"] for answer in answers if answer.get("refused")]
        assert refused and "lines of this key's lock shard are full" in refused[0]
        # The shard still serves: a key value with a free slot is admitted, and it continued as new.
        fresh = await temporal.get_workflow_handle(shard).execute_update(
            "claim", {"run_id": "fresh", "line": f"free-{uuid.uuid4().hex[:6]}", "max_concurrent": 1}
        )
        assert fresh["admitted"] is True
        assert (await temporal.get_workflow_handle(shard).describe()).run_id != (
            await temporal.get_workflow_handle(shard).fetch_history()
        ).events[0].workflow_execution_started_event_attributes.first_execution_run_id
        await assert_no_failed_task(temporal, shard)
    finally:
        await temporal.get_workflow_handle(shard).terminate(reason="test done")


async def test_the_worker_s_holder_check_setting_governs_a_key_lock(harness: Harness) -> None:
    flow, conversation = _flow(), f"c-{uuid.uuid4().hex[:6]}"
    # A starter configured otherwise than the worker (which checks every second here).
    starter = harness.dsmo.__class__(
        harness.dsmo.temporal, harness.dsmo.settings.with_changes(worker={"slot_holder_check_seconds": 999})
    )
    holder = (await starter.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    queued = (await starter.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    harness.started.extend([holder, queued])
    await _status(harness, holder, RunStatus.WAITING)
    shard, _ = shard_of(lock_id(flow.agent, conversation, harness.task_queue))
    handle = harness.dsmo.temporal.get_workflow_handle(shard)
    await until_value(  # the queued run asks for its slot through the worker
        lambda: handle.query("snapshot", result_type=KeyLocksState),
        lambda state: state.check_every_seconds is not None,
        "the lock checks its holders",
    )
    third = (await starter.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    harness.started.append(third)
    assert (
        await handle.query("snapshot", result_type=KeyLocksState)
    ).check_every_seconds == 1  # the worker's, not the starter's 999
    for run_id in (third, queued, holder):
        await starter.cancel(run_id, reason="done")


async def test_a_debounce_batch_closes_at_its_byte_budget_and_at_its_count(harness: Harness) -> None:
    dsmo = _client(harness)
    flow = parse_definition_text(DEBOUNCED.format(agent=f"deb-{uuid.uuid4().hex[:8]}", mode="all", message="ok"))
    order = f"o-{uuid.uuid4().hex[:6]}"
    # 60 starts of 25 KB: 1.5 MB in all, more than one batch carries.
    heavy = [{"order": {"id": order, "line": line, "notes": "n" * 25_000}} for line in range(60)]
    reports = [(await dsmo.start(flow, data, task_queue=harness.task_queue)).started for data in heavy]
    batches: dict[str, int] = {}
    for report in reports:
        batches[report.run_id] = report.gathered
    assert len(batches) == 2 and sum(batches.values()) == 60
    assert max(batches.values()) * 25_000 < BATCH_BYTES
    # 105 small starts at once: exactly 100 in the first batch.
    light = f"{order}-light"
    small = await asyncio.gather(
        *(dsmo.start(flow, {"order": {"id": light, "line": n}}, task_queue=harness.task_queue) for n in range(105))
    )
    counts: dict[str, int] = {}
    for handle in small:
        counts[handle.run_id] = max(counts.get(handle.run_id, 0), handle.started.gathered)
    assert sorted(counts.values()) == [5, 100]
    for run_id, gathered in [*batches.items(), *counts.items()]:
        harness.started.append(run_id)
        result = await _result_once_started(harness, run_id)  # every caller's run exists
        assert result.status is RunStatus.COMPLETED and len(result.variables["inputs"]) == gathered
    with pytest.raises(InvalidInputDocument, match=rf"^input: the start weighs .* at most {BATCH_BYTES:,}$"):
        await dsmo.start(flow, {"order": {"id": order, "notes": "é" * 600_000}}, task_queue=harness.task_queue)
    for key in (order, light):
        await assert_no_failed_task(harness.dsmo.temporal, debouncer_id(flow.agent, key))


async def test_a_move_whose_hand_over_is_too_large_is_refused_and_the_run_waits_on(harness: Harness) -> None:
    dsmo, agent = harness.dsmo, _agent()
    v1 = await _published(dsmo, V1, agent)
    # A valid target whose definition, with the run's 600 KB input, would pass the bound.
    # 250 more steps of 4,000-character messages: about 1 MB of definition.
    text = V1.format(agent=agent).replace('version: "1.0.0"', 'version: "2.0.0"').replace("next: bye", "next: pad0")
    steps = "".join(
        f'  pad{step}:\n    actionType: send_message\n    parameters: {{message: "{"w" * 3_990}"}}\n'
        f"    next: {'bye' if step == 249 else f'pad{step + 1}'}\n"
        for step in range(250)
    )
    v2 = parse_definition_text(text + steps)
    await dsmo.publish(v2)
    run_id = await harness.start(v1, {"candidate": "ana", "notes": "n" * 600_000})
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    too_large = rf"definition: the move would hand over .* at most {HANDOVER_LIMIT:,}"
    with pytest.raises(MigrationNotAccepted, match=too_large):  # a dry run says so too
        await dsmo.migrate_run(run_id, v2, dry_run=True)
    with pytest.raises(MigrationNotAccepted, match=too_large):
        await dsmo.migrate_run(run_id, v2)
    view = await dsmo.status(run_id)
    assert (view.status, view.workflow_version) == (RunStatus.WAITING, v1.workflow_version)
    await dsmo.cancel(run_id, reason="done")
    assert (await dsmo.result(run_id)).status is RunStatus.CANCELLED
    await assert_no_failed_task(dsmo.temporal, run_id)
