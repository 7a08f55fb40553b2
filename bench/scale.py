"""Many runs waiting at once on one worker process: memory, start time, resume latency."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
import uuid
from functools import partial
from typing import Any

import psutil  # type: ignore[import-untyped]

from bench.console_load import console_latency
from bench.cpu import listening_pid
from bench.jobs import bounded
from bench.metrics import percentile
from bench.workloads import wait_definition
from dsmo.starter.client.dsmo_client import DsmoClient
from dsmo.starter.config.settings import Settings
from dsmo.starter.devstack.stack import DevStack
from dsmo.workflows.common.status import RunStatus


def _rss_mb(pid: int) -> float:
    return float(psutil.Process(pid).memory_info().rss) / 1_000_000


def _server_pid(settings: Settings, stack: DevStack | None) -> int | None:
    if stack is not None:
        return stack.temporal.pid()
    return listening_pid(settings.temporal.port)


async def _resume_p50(dsmo: DsmoClient, run_ids: list[str]) -> float:
    times = []
    for run_id in run_ids:
        began = time.perf_counter()
        await dsmo.respond(run_id, "go")
        times.append(time.perf_counter() - began)
    return percentile(times, 50)


async def scale_test(settings: Settings, dsmo: DsmoClient, runs: int, stack: DevStack | None) -> dict[str, Any]:
    queue = f"bench-scale-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, **settings.to_env(), "DSMO_TASK_QUEUE": queue, "DSMO_METRICS_BIND": "off"}
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dsmo.worker",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    definition = wait_definition()
    run_ids = [f"scale-{queue}-{index}" for index in range(runs)]
    try:
        small = run_ids[:10]
        for run_id in small:
            await dsmo.start(definition, {}, run_id=run_id, task_queue=queue)
        for run_id in small:
            await dsmo.wait_for_status(run_id, {RunStatus.WAITING}, timeout=120)
        at_10 = await _resume_p50(dsmo, small)
        began = time.perf_counter()
        await bounded(
            40, [partial(dsmo.start, definition, {}, run_id=run_id, task_queue=queue) for run_id in run_ids[10:]]
        )
        # All waiting: counted through visibility, not by querying runs whose first task may still be queued.
        query = f"TaskQueue='{queue}' AND AgentExecutionStatus='waiting'"
        deadline = time.monotonic() + 1800
        target = runs - len(small)  # the first ten were resumed and have ended
        while (await dsmo.temporal.count_workflows(query)).count < target and time.monotonic() < deadline:
            await asyncio.sleep(2)
        start_seconds = time.perf_counter() - began
        await asyncio.sleep(2)
        worker_rss = _rss_mb(worker.pid)
        server_pid = _server_pid(settings, stack)
        server_rss = _rss_mb(server_pid) if server_pid else float("nan")
        sample = run_ids[10:][:: max(1, (runs - 10) // 20)][:20]
        at_scale = await _resume_p50(dsmo, sample)
        console = await console_latency(settings, definition.agent, run_ids[10:])
        return {
            "console": console,
            "runs": runs,
            "start_seconds": start_seconds,
            "worker_rss_mb": worker_rss,
            "server_rss_mb": server_rss,
            "resume_p50_at_scale": at_scale,
            "resume_p50_at_10": at_10,
        }
    finally:
        await bounded(40, [partial(_terminate, dsmo, run_id) for run_id in run_ids])
        worker.terminate()
        await worker.wait()


async def _terminate(dsmo: DsmoClient, run_id: str) -> None:
    with contextlib.suppress(Exception):  # already ended, or never started
        await dsmo.temporal.get_workflow_handle(run_id).terminate("benchmark over")
