"""Moving many waiting runs to a new version in one batch, beside the bare Temporal equivalent.

N runs of a version-1 definition wait for a reply on one worker process; version 2 (its closing
message changed) is published and all N are migrated in one batch. The reference, measured in the
same run on the same machine, is N plain workflows on their own worker process, each moved by one
update whose handler makes it continue as new with a state blob the size of DSMO's checkpoint
(`bench.studies.migrate.migration_bare`). Both sides: the same concurrency, latency timed by the same client
interceptor (`bench.studies.migrate.update_timer`), the worker's RSS sampled through the batch, history growth
read from Temporal, and every run checked to have moved (through visibility). The reference's
runs move in two halves, one before DSMO's batch and one after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
import uuid
from functools import partial
from typing import Any

from bench.jobs import bounded
from bench.studies.migrate.migration_bare import UPDATE, WORKFLOW
from bench.studies.migrate.migration_batch import migrate_batch
from bench.studies.migrate.migration_measures import FIRST_TASK_DONE, Side, move_payload_bytes, settled_count
from bench.studies.migrate.update_timer import UpdateTimer
from dsmo.client.definition_files import parse_definition_text
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.worker import WORKFLOW_TASK_SLOTS
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.migration_io import MIGRATE_UPDATE
from dsmo.workflows.definition.model import AgentDefinition

CONCURRENCY = 20  # the batch runner's default: both sides move this many runs at once
STARTS_AT_ONCE = 40  # as the scale test starts its runs

DEFINITION = """
agent: {agent}
version: "{version}"
start: ask
nodes:
  ask:
    actionType: wait_for_response
    parameters: {{timeout: 7d}}
    next: bye
  bye:
    actionType: send_message
    parameters: {{message: "{message}"}}
"""


def versions(agent: str) -> tuple[AgentDefinition, AgentDefinition]:
    """Version 1 and version 2 of the bench agent: the message after the wait is corrected."""
    v1 = parse_definition_text(DEFINITION.format(agent=agent, version="1.0.0", message="Thanks"))
    v2 = parse_definition_text(DEFINITION.format(agent=agent, version="2.0.0", message="Thank you, we are on it"))
    return v1, v2


async def migration_bench(settings: Settings, dsmo: DsmoClient, runs: int) -> dict[str, Any]:
    """Migrate ``runs`` waiting runs in one batch and move as many bare workflows; the figures of both.

    Returns:
        ``{"runs", "concurrency", "checkpoint_bytes", "request_bytes", "dsmo": {...}, "bare": {...},
        "ratio", "batch_report", "seconds", "load_average"}``, each side with its rate, latency,
        RSS, CPU and history growth.
    """
    began = time.perf_counter()
    tag = uuid.uuid4().hex[:6]
    agent, dsmo_queue, bare_queue = f"bench-migrate-{tag}", f"bench-migrate-{tag}", f"bench-bare-move-{tag}"
    timer = UpdateTimer()
    timed = DsmoClient(timer.timed(dsmo.temporal), settings)
    v1, v2 = versions(agent)
    dsmo_ids = [f"migrate-{tag}-{index}" for index in range(runs)]
    bare_ids = [f"bare-move-{tag}-{index}" for index in range(runs)]
    env = {**os.environ, **settings.to_env(), "DSMO_TASK_QUEUE": dsmo_queue, "DSMO_METRICS_BIND": "off"}
    t = settings.temporal
    workers = [
        await _process(env, "dsmo.worker"),
        await _process(
            env, "bench.studies.migrate.migration_bare", t.address, t.namespace, bare_queue, str(WORKFLOW_TASK_SLOTS)
        ),
    ]
    warm = f"migrate-{tag}-warm"
    started = [warm, *bare_ids, *dsmo_ids]
    try:
        request_bytes, checkpoint_bytes = await _warm_up(dsmo, v1, v2, warm, dsmo_queue)
        timer.seconds.clear()
        state = {"generation": 0, "blob": "x" * checkpoint_bytes}
        await bounded(STARTS_AT_ONCE, [partial(_start_bare, dsmo, i, bare_queue, state) for i in bare_ids])
        await _first_tasks_done(dsmo, bare_ids)
        await bounded(STARTS_AT_ONCE, [partial(dsmo.start, v1, {}, run_id=i, task_queue=dsmo_queue) for i in dsmo_ids])
        waiting = f"TaskQueue = '{dsmo_queue}' AND AgentExecutionStatus = 'waiting'"
        await settled_count(dsmo.temporal, waiting, runs + 1, timeout=max(120.0, runs / 5))
        before_batches = time.perf_counter() - began
        _progress(began, f"{runs} DSMO runs and {runs} bare workflows waiting; moving them")

        # The reference moves its runs in two halves, one before DSMO's batch and one after, so a
        # change in the machine's load over the section meets both sides alike.
        load = os.getloadavg()
        ask = {"generation": 1, "payload": "x" * request_bytes}
        bare = Side(settings, dsmo.temporal, bare_ids, workers[1].pid)
        ours = Side(settings, dsmo.temporal, dsmo_ids, workers[0].pid)
        bare_counts = [await bare.batch(partial(_bare_batch, timed, bare_ids[: runs // 2], ask))]
        batch_report = await ours.batch(partial(migrate_batch, timed, agent, v1, v2, concurrency=CONCURRENCY))
        _progress(began, f"DSMO's batch done in {ours.seconds:.0f} s")
        bare_counts.append(await bare.batch(partial(_bare_batch, timed, bare_ids[runs // 2 :], ask)))
        load_after = os.getloadavg()

        on_v2 = (
            f"TaskQueue = '{dsmo_queue}' AND ExecutionStatus = 'Running' AND WorkflowVersion = '{v2.workflow_version}'"
        )
        dsmo_side = await ours.figures(f"{on_v2} AND AgentExecutionStatus = 'waiting'", runs + 1)
        dsmo_side["moved_visible"] -= 1  # the warm-up run is on version 2 too
        dsmo_side.update(latency(timer.seconds[MIGRATE_UPDATE]), summary=batch_report["summary"])
        bare_side = await bare.figures(f"TaskQueue = '{bare_queue}' AND ExecutionStatus = 'ContinuedAsNew'", runs)
        bare_summary = {key: sum(counts[key] for counts in bare_counts) for key in ("done", "failed", "total")}
        bare_side.update(latency(timer.seconds[UPDATE]), summary=bare_summary)
        _progress(began, f"{dsmo_side['runs_per_second']} against {bare_side['runs_per_second']} runs moved per second")
        return {
            "runs": runs,
            "concurrency": CONCURRENCY,
            "request_bytes": request_bytes,
            "checkpoint_bytes": checkpoint_bytes,
            "dsmo": dsmo_side,
            "bare": bare_side,
            "ratio": dsmo_side["runs_per_second"] / bare_side["runs_per_second"],
            "batch_report": batch_report,
            "seconds": round(time.perf_counter() - began, 1),
            "seconds_before_batches": round(before_batches, 1),  # starting both sides' runs
            # The machine is shared: its 1/5/15-minute load as the batches began, and as they ended.
            "load_average": {"before": [round(x, 2) for x in load], "after": [round(x, 2) for x in load_after]},
        }
    finally:
        for worker in workers:
            worker.terminate()
            await worker.wait()
        await bounded(STARTS_AT_ONCE, [partial(_terminate, dsmo, run_id) for run_id in started])


async def _warm_up(
    dsmo: DsmoClient, v1: AgentDefinition, v2: AgentDefinition, run_id: str, queue: str
) -> tuple[int, int]:
    """Publish both versions and move one run: the worker warmed up, and the sizes the reference copies."""
    for definition in (v1, v2):
        await dsmo.publish(definition)
    await dsmo.start(v1, {}, run_id=run_id, task_queue=queue)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING}, timeout=120)
    await dsmo.migrate_run(run_id, v2, reason="benchmark", by="bench")
    return await move_payload_bytes(dsmo.temporal, run_id)


def _progress(began: float, text: str) -> None:
    print(f"  migration, {time.perf_counter() - began:.0f} s: {text}", flush=True)


def latency(seconds: list[float]) -> dict[str, Any]:
    """p50/p95 of the updates' round trips, in seconds, and how many were timed."""
    from bench.metrics import percentile

    return {
        "latency_p50_s": round(percentile(seconds, 50), 4),
        "latency_p95_s": round(percentile(seconds, 95), 4),
        "updates_timed": len(seconds),
    }


async def _bare_batch(dsmo: DsmoClient, run_ids: list[str], ask: dict[str, Any]) -> dict[str, int]:
    async def move(run_id: str) -> bool:
        try:
            await dsmo.temporal.get_workflow_handle(run_id).execute_update(UPDATE, ask)
        except Exception:  # noqa: BLE001 - counted, as the batch counts a failed run
            return False
        return True

    moved = await bounded(CONCURRENCY, [partial(move, run_id) for run_id in run_ids])
    return {"done": sum(moved), "failed": len(moved) - sum(moved), "total": len(moved)}


async def _start_bare(dsmo: DsmoClient, run_id: str, queue: str, state: dict[str, Any]) -> None:
    await dsmo.temporal.start_workflow(WORKFLOW, state, id=run_id, task_queue=queue)


async def _first_tasks_done(dsmo: DsmoClient, run_ids: list[str]) -> None:
    """Wait until the last runs started have had their first workflow task (the queue is then drained)."""
    deadline = time.monotonic() + 300
    for run_id in run_ids[-5:]:
        handle = dsmo.temporal.get_workflow_handle(run_id)
        while (await handle.describe()).raw_description.workflow_execution_info.history_length < FIRST_TASK_DONE:
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id}: its first workflow task did not complete in 300 s")
            await asyncio.sleep(0.5)


async def _process(env: dict[str, str], module: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def _terminate(dsmo: DsmoClient, run_id: str) -> None:
    with contextlib.suppress(Exception):  # already ended, or never started
        await dsmo.temporal.get_workflow_handle(run_id).terminate("benchmark over")
