"""Moving many waiting runs to a new version in one batch, beside the bare Temporal equivalent.

N runs of a version-1 definition wait for a reply on one worker process; version 2 (its closing
message changed) is published and all N are migrated in one batch. The reference, measured in the
same run on the same machine, is N plain workflows on their own worker process, each moved by one
update whose handler makes it continue as new with a state blob the size of DSMO's checkpoint
(`bench.migration_bare`). Both sides: the same concurrency, latency timed by the same client
interceptor (`bench.update_timer`), the worker's RSS sampled through the batch, history growth
read from Temporal, and every run checked to have moved (through visibility).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import psutil  # type: ignore[import-untyped]

from bench.cpu import CpuMeter, per_run_ms
from bench.jobs import bounded
from bench.migration_bare import UPDATE, WORKFLOW
from bench.migration_batch import migrate_batch
from bench.migration_measures import (
    FIRST_TASK_DONE,
    RssSampler,
    growth,
    history_sizes,
    move_payload_bytes,
    settled_count,
)
from bench.update_timer import UpdateTimer
from dsmo.starter.client.definition_files import parse_definition_text
from dsmo.starter.client.dsmo_client import DsmoClient
from dsmo.starter.config.settings import Settings
from dsmo.worker import WORKFLOW_TASK_SLOTS
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.migration_io import MIGRATE_UPDATE
from dsmo.workflows.definition.model import AgentDefinition

CONCURRENCY = 20  # the batch runner's default: both sides move this many runs at once
STARTS_AT_ONCE = 40  # as the scale test starts its runs
SAMPLE = 20  # runs per side whose history growth is read

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
        "ratio", "batch_report"}``, each side with its rate, latency, RSS, CPU and history growth.
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
        await _process(env, "bench.migration_bare", t.address, t.namespace, bare_queue, str(WORKFLOW_TASK_SLOTS)),
    ]
    started: list[str] = []
    try:
        for definition in (v1, v2):
            await dsmo.publish(definition)
        # One run moved first: the worker warmed up, and the sizes the reference copies.
        warm = f"migrate-{tag}-warm"
        started.append(warm)
        await dsmo.start(v1, {}, run_id=warm, task_queue=dsmo_queue)
        await dsmo.wait_for_status(warm, {RunStatus.WAITING}, timeout=120)
        await dsmo.migrate_run(warm, v2, reason="benchmark", by="bench")
        request_bytes, checkpoint_bytes = await move_payload_bytes(dsmo.temporal, warm)
        timer.seconds.clear()

        started += dsmo_ids
        await bounded(STARTS_AT_ONCE, [partial(dsmo.start, v1, {}, run_id=i, task_queue=dsmo_queue) for i in dsmo_ids])
        waiting = f"TaskQueue = '{dsmo_queue}' AND AgentExecutionStatus = 'waiting'"
        await settled_count(dsmo.temporal, waiting, runs + 1, timeout=max(120.0, runs / 5))
        _progress(began, f"{runs} DSMO runs waiting; migrating them")
        load = os.getloadavg()
        dsmo_side = await _side(
            settings,
            dsmo,
            dsmo_ids,
            workers[0].pid,
            lambda: migrate_batch(timed, agent, v1, v2, dsmo_ids, concurrency=CONCURRENCY),
            moved=f"TaskQueue = '{dsmo_queue}' AND WorkflowVersion = '{v2.workflow_version}' "
            "AND AgentExecutionStatus = 'waiting'",
            expected=runs + 1,
        )
        dsmo_side["moved_visible"] -= 1  # the warm-up run is on version 2 too
        batch_report = dsmo_side.pop("report")
        dsmo_side.update(latency(timer.seconds[MIGRATE_UPDATE]), summary=batch_report["summary"])
        _progress(began, f"DSMO: {dsmo_side['runs_per_second']} runs moved per second; starting the bare workflows")

        state = {"generation": 0, "blob": "x" * checkpoint_bytes}
        started += bare_ids
        await bounded(STARTS_AT_ONCE, [partial(_start_bare, dsmo, i, bare_queue, state) for i in bare_ids])
        await _first_tasks_done(dsmo, bare_ids)
        _progress(began, f"{runs} bare workflows waiting; moving them")
        ask = {"generation": 1, "payload": "x" * request_bytes}
        bare_side = await _side(
            settings,
            dsmo,
            bare_ids,
            workers[1].pid,
            lambda: _bare_batch(timed, bare_ids, ask),
            moved=f"TaskQueue = '{bare_queue}' AND ExecutionStatus = 'ContinuedAsNew'",
            expected=runs,
        )
        bare_report = bare_side.pop("report")
        bare_side.update(latency(timer.seconds[UPDATE]), summary=bare_report)
        _progress(began, f"bare: {bare_side['runs_per_second']} moved per second; ending the {len(started)} runs")
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
            # The machine is shared: its 1/5/15-minute load as the batches began, and as they ended.
            "load_average": {"before": [round(x, 2) for x in load], "after": [round(x, 2) for x in os.getloadavg()]},
        }
    finally:
        for worker in workers:
            worker.terminate()
            await worker.wait()
        await bounded(STARTS_AT_ONCE, [partial(_terminate, dsmo, run_id) for run_id in started])


def _progress(began: float, text: str) -> None:
    print(f"  migration, {time.perf_counter() - began:.0f} s: {text}", flush=True)


async def _side(
    settings: Settings,
    dsmo: DsmoClient,
    run_ids: list[str],
    worker_pid: int,
    batch: Callable[[], Awaitable[dict[str, Any]]],
    *,
    moved: str,
    expected: int,
) -> dict[str, Any]:
    """One side's batch: its wall time, worker RSS and CPU, history growth, and the runs that moved."""
    sample = run_ids[:: max(1, len(run_ids) // SAMPLE)][:SAMPLE]
    before = await history_sizes(dsmo.temporal, sample)
    meter = CpuMeter.for_stack(settings)
    meter.processes["worker"] = psutil.Process(worker_pid)
    cpu_before = meter.sample()
    async with RssSampler(worker_pid) as rss:
        began = time.perf_counter()
        report = await batch()
        seconds = time.perf_counter() - began
    cpu_after = meter.sample()
    visible = await settled_count(dsmo.temporal, moved, expected, timeout=120)
    return {
        "seconds": round(seconds, 2),
        "runs_per_second": round(len(run_ids) / seconds, 1),
        "moved_visible": visible,
        "worker_rss_mb": rss.figures(),
        "cpu_ms_per_run": {role: round(ms, 2) for role, ms in per_run_ms(cpu_before, cpu_after, len(run_ids)).items()},
        "history": await growth(dsmo.temporal, before),
        "report": report,
    }


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
