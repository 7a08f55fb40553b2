"""`make hostile`, the sizes part: what DSMO's helper workflows and a move carry, against their bounds.

On a worker in this process: a key value's line filled with 200-character run ids until its lock
refuses a claim (bound: refused at `LINE_LIMIT`, the lock's carried state under 2 MB); a lock
shard filled with 1,000-character run ids, by starters' claims until refused at `SHARD_BUDGET`,
then by runs' asks up to `SHARD_CEILING`, and a delayed start of the shard asking then (bound: it
ends FAILED with the reason, the state under 2 MB, the shard still serving); a
``mode: all`` debounce key sent 100 starts of 25 KB (bound: every batch at most
`DEBOUNCE_MAX_INPUTS` starts and `BATCH_BYTES`, every batch's run exists); a waiting run with a
600 KB input asked to move to a valid 1 MB target (bound: refused with the reason, the run still
waiting). In every case no workflow task fails (the histories are scanned). Prints a table and
writes `bench/results/hostile-sizes.json`.

    python -m bench hostile --part memory   # with the memory cases
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from bench.stack import Stack
from dsmo.activities.messaging import FileChannel
from dsmo.activities.processors import default_registry
from dsmo.client.client_errors import MigrationNotAccepted
from dsmo.client.debounced_starts import debouncer_id
from dsmo.client.definition_files import parse_definition_text
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.runtime.storage import artifact_store
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.migration_io import HANDOVER_LIMIT
from dsmo.workflows.definition.flow_control import DEBOUNCE_MAX_INPUTS, lock_id, shard_of
from dsmo.workflows.flow.debouncer import BATCH_BYTES
from dsmo.workflows.flow.key_lines import LINE_LIMIT, SHARD_BUDGET, SHARD_CEILING, carried_bytes, entry_bytes
from dsmo.workflows.flow.key_locks import KeyLocks, KeyLocksState

TWO_MB = 2 * 1024 * 1024

WAITING = """
agent: {agent}
version: "{version}"
inputs: [order, inputs]
{extra}
start: ask
nodes:
  ask:
    actionType: wait_for_response
    parameters: {{timeout: 1h, onTimeout: fail}}
    next: {after}
{steps}  bye:
    actionType: send_message
    parameters: {{message: "done"}}
"""


@dataclass
class SizeCase:
    """One size measured against its bound."""

    case: str
    measured: str
    bound: str
    failed_tasks: int
    within_bound: bool


async def failed_tasks(temporal: Client, workflow_id: str) -> int:
    """Workflow tasks that failed in every run of ``workflow_id``, back along its continue-as-new chain."""
    failed, run_id = 0, None
    while True:
        history = await temporal.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        failed += sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED for e in history.events)
        run_id = history.events[0].workflow_execution_started_event_attributes.continued_execution_run_id or None
        if run_id is None:
            return failed


async def lock_line(dsmo: DsmoClient, queue: str) -> SizeCase:
    """One line filled with 200-character run ids until the lock refuses."""
    shard = f"dsmo-keys.hostile-{uuid.uuid4().hex[:6]}.{queue}.0"
    await dsmo.temporal.start_workflow(KeyLocks.run, KeyLocksState(owner="hostile"), id=shard, task_queue=queue)
    handle, queued, refused = dsmo.temporal.get_workflow_handle(shard), 0, ""
    try:
        for at in range(0, 2 * LINE_LIMIT, 8):
            ids = [f"r{index:05d}-" + "x" * 193 for index in range(at, at + 8)]
            asks = [{"run_id": run_id, "line": "l", "queue": True, "max_concurrent": 11} for run_id in ids]
            answers = await asyncio.gather(*(handle.execute_update("claim", ask) for ask in asks))
            queued += sum(not answer["admitted"] and not answer.get("refused") for answer in answers)
            refused = next((answer["refused"] for answer in answers if answer.get("refused")), "")
            if refused:
                break
        started = time.perf_counter()  # one more claim, alone: how fast a full line answers
        await handle.execute_update("claim", {"run_id": "one-more", "line": "l", "queue": True, "max_concurrent": 11})
        seconds = time.perf_counter() - started
        carried = len((await handle.query("snapshot", result_type=KeyLocksState)).model_dump_json())
        failed = await failed_tasks(dsmo.temporal, shard)
    finally:
        await handle.terminate(reason="hostile sizes done")
    within = bool(refused) and queued == LINE_LIMIT and carried < TWO_MB and not failed
    measured = f"{queued:,} in line, then refused ({seconds * 1000:.0f} ms a claim); lock state {carried:,} B"
    return SizeCase("lock line, 200-char run ids", measured, f"refused at {LINE_LIMIT:,}; state < 2 MB", failed, within)


async def shard_ceiling(dsmo: DsmoClient, queue: str) -> SizeCase:
    """A shard filled with 1,000-character run ids: claims up to its budget, asks up to its ceiling;
    then a delayed start of one of its keys asks for its slot."""
    agent, order = f"hostile-key-{uuid.uuid4().hex[:6]}", f"o-{uuid.uuid4().hex[:6]}"
    extra = 'concurrency: [{key: "{{order.id}}", limit: 1}]'
    flow = parse_definition_text(WAITING.format(agent=agent, version="1.0.0", extra=extra, after="bye", steps=""))
    shard, _ = shard_of(lock_id(agent, order, queue))
    await dsmo.temporal.start_workflow(KeyLocks.run, KeyLocksState(owner=agent), id=shard, task_queue=queue)
    handle, at_refusal = dsmo.temporal.get_workflow_handle(shard), 0
    ask = {"line": "filler", "queue": True, "max_concurrent": 11}
    try:
        for at in range(0, SHARD_BUDGET // 1_000, 8):  # claims, as starters make them, until refused
            ids = [f"c{index:05d}-" + "x" * 993 for index in range(at, at + 8)]
            answers = await asyncio.gather(*(handle.execute_update("claim", {**ask, "run_id": i}) for i in ids))
            if any(answer.get("refused") for answer in answers):
                at_refusal = carried_bytes((await handle.query("snapshot", result_type=KeyLocksState)).lines)
                break
        await _fill_with_asks(handle, {**ask, "queue": False})
        started = time.perf_counter()
        run_id = (
            await dsmo.start(flow, {"order": {"id": order}}, task_queue=queue, start_delay=timedelta(seconds=1))
        ).run_id
        view = await dsmo.wait_for_status(run_id, {RunStatus.FAILED, RunStatus.WAITING})
        seconds = time.perf_counter() - started - 1  # after its delay
        state = await handle.query("snapshot", result_type=KeyLocksState)
        carried = len(state.model_dump_json())
        fresh = await handle.execute_update("claim", {"run_id": "fresh", "line": "free", "max_concurrent": 1})
        failed = await failed_tasks(dsmo.temporal, shard) + await failed_tasks(dsmo.temporal, run_id)
    finally:
        await handle.terminate(reason="hostile sizes done")
    told = view.status is RunStatus.FAILED and "is full" in (view.error_message or "")
    within = bool(at_refusal) and told and carried < TWO_MB and fresh["admitted"] and not failed
    measured = (
        f"claims refused at {at_refusal:,} B; a delayed start at {carried_bytes(state.lines):,} B (estimate) "
        f"{'FAILED, told' if told else view.status.value} in {seconds:.2f} s; lock state {carried:,} B"
    )
    bound = f"claims refused past {SHARD_BUDGET:,} B, a started run past {SHARD_CEILING:,} B; state < 2 MB"
    return SizeCase("lock shard, 1,000-char run ids", measured, bound, failed, within)


async def _fill_with_asks(handle: WorkflowHandle[Any, Any], ask: dict[str, Any]) -> None:
    """Runs' asks (`acquire`) until the shard carries within 200 bytes of its ceiling."""
    index, room = 0, entry_bytes("x" * 1_000)
    for _ in range(20):  # a hang guard: each round fills what is left, in long ids then a short one
        gap = SHARD_CEILING - carried_bytes((await handle.query("snapshot", result_type=KeyLocksState)).lines)
        if gap <= 200:
            return
        sizes = [1_000] * max(1, (gap - room) // room) if gap > room else [max(8, (gap - 64) // 3 - 8)]
        runs = [f"a{(index := index + 1):05d}-" + "y" * (size - 7) for size in sizes]
        for at in range(0, len(runs), 25):
            await asyncio.gather(*(handle.signal("acquire", {**ask, "run_id": run}) for run in runs[at : at + 25]))


async def debounce_batch(dsmo: DsmoClient, queue: str) -> SizeCase:
    """100 starts of 25 KB on one ``mode: all`` key."""
    agent, order = f"hostile-deb-{uuid.uuid4().hex[:6]}", f"o-{uuid.uuid4().hex[:6]}"
    extra = 'debounce: {key: "{{order.id}}", period: 2s, mode: all}'
    flow = parse_definition_text(WAITING.format(agent=agent, version="1.0.0", extra=extra, after="bye", steps=""))
    batches: dict[str, int] = {}
    started = time.perf_counter()
    for line in range(100):
        report = (
            await dsmo.start(flow, {"order": {"id": order, "line": line, "n": "n" * 25_000}}, task_queue=queue)
        ).started
        batches[report.run_id] = report.gathered
    seconds, runs = time.perf_counter() - started, 0
    for run_id in batches:
        for _ in range(300):  # a hang guard: each batch's run starts once its key is quiet
            if await _exists(dsmo, run_id):
                runs += 1
                break
            await asyncio.sleep(0.1)
    failed = await failed_tasks(dsmo.temporal, debouncer_id(agent, order))
    largest = max(batches.values())
    within = largest <= DEBOUNCE_MAX_INPUTS and largest * 25_000 < BATCH_BYTES and runs == len(batches) and not failed
    measured = (
        f"{len(batches)} batches of at most {largest} starts (~{largest * 25:,} KB); {runs} runs exist; "
        f"100 starts answered in {seconds:.1f} s"
    )
    bound = f"<= {DEBOUNCE_MAX_INPUTS} starts and {BATCH_BYTES:,} B a batch"
    return SizeCase("debounce batch, 100 starts of 25 KB", measured, bound, failed, within)


async def _exists(dsmo: DsmoClient, run_id: str) -> bool:
    try:
        await dsmo.temporal.get_workflow_handle(run_id).describe()
    except Exception:  # noqa: BLE001 - not started yet
        return False
    return True


async def migration_target(dsmo: DsmoClient, queue: str) -> SizeCase:
    """A waiting run with a 600 KB input asked to move to a valid target of about 1 MB."""
    agent = f"hostile-move-{uuid.uuid4().hex[:6]}"
    v1 = parse_definition_text(WAITING.format(agent=agent, version="1.0.0", extra="", after="bye", steps=""))
    steps = "".join(
        f'  pad{step}:\n    actionType: send_message\n    parameters: {{message: "{"w" * 3_990}"}}\n'
        f"    next: {'bye' if step == 249 else f'pad{step + 1}'}\n"
        for step in range(250)
    )
    v2 = parse_definition_text(WAITING.format(agent=agent, version="2.0.0", extra="", after="pad0", steps=steps))
    await dsmo.publish(v1)
    await dsmo.publish(v2)
    run_id = (await dsmo.start(v1, {"order": {"notes": "n" * 600_000}}, task_queue=queue)).run_id
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    started, answer = time.perf_counter(), "accepted"
    try:
        await dsmo.migrate_run(run_id, v2)
    except MigrationNotAccepted as err:
        answer = str(err).split("definition: ", 1)[-1]
    seconds = time.perf_counter() - started
    still = (await dsmo.status(run_id)).status is RunStatus.WAITING
    await dsmo.cancel(run_id, reason="hostile sizes done")
    await dsmo.result(run_id)
    failed = await failed_tasks(dsmo.temporal, run_id)
    within = answer != "accepted" and still and not failed
    measured = f"{answer} ({seconds:.2f} s; run still waiting: {'yes' if still else 'NO'})"
    return SizeCase(
        "migration target of 1 MB, input 600 KB", measured, f"refused > {HANDOVER_LIMIT:,} B", failed, within
    )


async def measure(settings: Settings, out_dir: Path) -> list[SizeCase]:
    """Every case on a worker in this process; writes ``out_dir/hostile-sizes.json``."""
    dsmo = await DsmoClient.connect(settings)
    queue = f"hostile-sizes-{uuid.uuid4().hex[:6]}"
    outbox = settings.state_dir / "hostile-outbox"
    worker = build_worker(
        dsmo.temporal, task_queue=queue, store=artifact_store(settings), channel=FileChannel(outbox),
        registry=default_registry,
    )  # fmt: skip
    async with worker:
        cases = [await lock_line(dsmo, queue), await shard_ceiling(dsmo, queue)]
        cases += [await debounce_batch(dsmo, queue), await migration_target(dsmo, queue)]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "hostile-sizes.json").write_text(json.dumps([asdict(case) for case in cases], indent=2) + "\n")
    return cases


async def on_a_stack(stack: Stack, out_dir: Path) -> list[SizeCase]:
    """`measure` on ``stack()`` (the running stack, or one started for it)."""
    async with stack() as (settings, _):
        return await measure(settings, out_dir)


def table(cases: list[SizeCase]) -> str:
    lines = ["| what is carried | measured | bound | failed workflow tasks | within |", "|---|---|---|---:|---|"]
    for case in cases:
        lines.append(
            f"| {case.case} | {case.measured.replace('|', '/')} | {case.bound} | {case.failed_tasks} "
            f"| {'yes' if case.within_bound else 'NO'} |"
        )
    return "\n".join(lines)
