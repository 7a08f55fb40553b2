"""Many runs waiting at once on one worker process, beside bare Temporal doing the same.

DSMO runs that wait for a reply are started on one worker process (`dsmo.worker`), and bare
Temporal workflows that wait for one update on their own worker (`bench.studies.scale.scale_floor`), the same
number, in alternating chunks of `CHUNK` starts; both are then resumed at the same fixed rate, in
alternating chunks of `CHUNK` replies (so a drift of the machine over the test falls on both).
Measured: start and resume rates of both, reply latency (the update accepted) with 100 and with
all waiting, worker and server memory, history bytes of a waiting run started first and last
(flat: a run's size does not grow with how many wait), and the console's task list with all waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

import psutil  # type: ignore[import-untyped]
from temporalio.client import Client

from bench.cpu import listening_pid
from bench.jobs import bounded
from bench.metrics import percentile
from bench.studies.scale.console_load import console_latency
from bench.workloads import wait_definition
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.devstack.stack import DevStack
from dsmo.workflows.common.status import RunStatus

FIRST = 100  # runs resumed one by one before the rest start: reply latency with few waiting
SAMPLE = 100  # replies timed one by one with all waiting
START_CONCURRENCY = 40
RESUME_RATE = 200.0  # replies per second offered to each side when all are resumed
CHUNK = 2_000  # replies scheduled at a time (no 100,000 sleeping tasks at once), and each side's turn

T = TypeVar("T")


def _rss_mb(pid: int | None) -> float:
    return float(psutil.Process(pid).memory_info().rss) / 1_000_000 if pid else float("nan")


def _server_pid(settings: Settings, stack: DevStack | None) -> int | None:
    if stack is not None and stack.temporal.pid():
        return stack.temporal.pid()
    return listening_pid(settings.temporal.port)


async def _worker(settings: Settings, queue: str, module: str) -> asyncio.subprocess.Process:
    env = {**os.environ, **settings.to_env(), "DSMO_TASK_QUEUE": queue, "DSMO_METRICS_BIND": "off"}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )


async def _timed_each(calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[float]:
    times = []
    for call in calls:
        began = time.perf_counter()
        await call()
        times.append(time.perf_counter() - began)
    return times


async def paced(rate: float, calls: Sequence[Callable[[], Awaitable[Any]]], limit: int = 64) -> dict[str, float]:
    """Make ``calls`` at ``rate`` per second (at most ``limit`` at once); the rate achieved and latency."""
    seconds, latencies = await _paced(rate, calls, limit)
    return _rates(rate, len(calls), seconds, latencies)


def alternated(sides: Mapping[str, Sequence[T]], chunk: int) -> list[tuple[str, Sequence[T]]]:
    """``sides``' items in chunks of ``chunk``, taking turns, the side that goes first swapping each
    round (A B, B A, A B, ...), so a drift of the machine over the test falls on every side alike."""
    order = list(sides)
    rounds = max((len(items) + chunk - 1) // chunk for items in sides.values()) if sides else 0
    turns: list[tuple[str, Sequence[T]]] = []
    for index in range(rounds):
        for name in order if index % 2 == 0 else order[::-1]:
            part = sides[name][index * chunk : (index + 1) * chunk]
            if part:
                turns.append((name, part))
    return turns


async def paced_sides(
    rate: float, sides: Mapping[str, Sequence[Callable[[], Awaitable[Any]]]], chunk: int = CHUNK, limit: int = 64
) -> dict[str, dict[str, float]]:
    """`paced` for several sides, alternating in chunks (`alternated`); each side's rate is its
    calls over the seconds of its own chunks, its latency from its own calls."""
    seconds = dict.fromkeys(sides, 0.0)
    latencies: dict[str, list[float]] = {name: [] for name in sides}
    for name, calls in alternated(sides, chunk):
        took, measured = await _paced(rate, calls, limit)
        seconds[name] += took
        latencies[name] += measured
    return {name: _rates(rate, len(sides[name]), seconds[name], latencies[name]) for name in sides}


async def bounded_sides(
    sides: Mapping[str, Sequence[Callable[[], Awaitable[Any]]]], limit: int, chunk: int = CHUNK
) -> dict[str, float]:
    """Each side's calls, ``limit`` at a time, in alternating chunks (`alternated`).

    Returns:
        The seconds each side's own chunks took, by side.
    """
    seconds = dict.fromkeys(sides, 0.0)
    for name, calls in alternated(sides, chunk):
        began = time.perf_counter()
        await bounded(limit, list(calls))
        seconds[name] += time.perf_counter() - began
    return seconds


def _rates(rate: float, count: int, seconds: float, latencies: list[float]) -> dict[str, float]:
    return {
        "offered_per_s": rate,
        "achieved_per_s": count / seconds if seconds else float("nan"),
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
    }


async def _paced(rate: float, calls: Sequence[Callable[[], Awaitable[Any]]], limit: int) -> tuple[float, list[float]]:
    """Make ``calls`` at ``rate`` per second, at most ``limit`` at once: the seconds taken and each call's latency."""
    gate = asyncio.Semaphore(limit)
    latencies: list[float] = []
    began = time.perf_counter()

    async def one(index: int, call: Callable[[], Awaitable[Any]]) -> None:
        delay = began + index / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        async with gate:
            sent = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - sent)

    for offset in range(0, len(calls), CHUNK):
        await asyncio.gather(*(one(offset + i, call) for i, call in enumerate(calls[offset : offset + CHUNK])))
    return time.perf_counter() - began, latencies


async def _history_bytes(client: Client, run_id: str) -> int:
    history = await client.get_workflow_handle(run_id).fetch_history()
    return sum(event.ByteSize() for event in history.events)


async def _until_counted(client: Client, query: str, target: int, timeout: float = 7200) -> None:
    deadline = time.monotonic() + timeout
    while (await client.count_workflows(query)).count < target and time.monotonic() < deadline:
        await asyncio.sleep(2)


async def scale_test(settings: Settings, dsmo: DsmoClient, runs: int, stack: DevStack | None) -> dict[str, Any]:
    token = uuid.uuid4().hex[:6]
    queue, floor_queue = f"bench-scale-{token}", f"bench-scale-floor-{token}"
    worker = await _worker(settings, queue, "dsmo.worker")
    floor_worker = await _worker(settings, floor_queue, "bench.studies.scale.scale_floor")
    client = dsmo.temporal
    definition = wait_definition()
    run_ids = [f"scale-{queue}-{index}" for index in range(runs)]
    floor_ids = [f"scale-floor-{token}-{index}" for index in range(runs)]
    first, rest = run_ids[:FIRST], run_ids[FIRST:]
    finished = False
    try:
        for run_id in first:
            await dsmo.start(definition, {}, run_id=run_id, task_queue=queue)
        for run_id in first:
            await dsmo.wait_for_status(run_id, {RunStatus.WAITING}, timeout=120)
        history_first = await _history_bytes(client, first[0])
        at_first = await _timed_each([partial(dsmo.respond, run_id, "go") for run_id in first])

        began = time.perf_counter()
        # Both sides started in alternating chunks too, each side's rate over its own chunks.
        start_calls = await bounded_sides(
            {
                "dsmo": [partial(dsmo.start, definition, {}, run_id=run_id, task_queue=queue) for run_id in rest],
                "floor": [
                    partial(client.start_workflow, "ScaleWait", id=run_id, task_queue=floor_queue)
                    for run_id in floor_ids
                ],
            },
            START_CONCURRENCY,
        )
        start_calls_seconds, floor_start_seconds = start_calls["dsmo"], start_calls["floor"]
        # All waiting: counted through visibility, not by querying runs whose first task may still be queued.
        await _until_counted(client, f"TaskQueue='{queue}' AND AgentExecutionStatus='waiting'", len(rest))
        start_seconds = time.perf_counter() - began
        await asyncio.sleep(2)
        worker_rss, server_pid = _rss_mb(worker.pid), _server_pid(settings, stack)
        server_rss = _rss_mb(server_pid)
        history_last = await _history_bytes(client, rest[-1])
        size = min(SAMPLE, max(1, len(rest) // 10))  # most runs are left for the paced resume
        sample = rest[:: max(1, len(rest) // size)][:size]
        at_scale = await _timed_each([partial(dsmo.respond, run_id, "go") for run_id in sample])
        console = await console_latency(settings, client, definition.agent, rest)

        left = [run_id for run_id in rest if run_id not in set(sample)]
        # Both sides resumed in alternating chunks (DSMO, bare, bare, DSMO, ...), not one after the other.
        resumed = await paced_sides(
            RESUME_RATE,
            {
                "dsmo": [partial(dsmo.respond, run_id, "go") for run_id in left],
                "floor": [
                    partial(client.get_workflow_handle(run_id).execute_update, "reply", "go") for run_id in floor_ids
                ],
            },
        )
        resume, floor_resume = resumed["dsmo"], resumed["floor"]
        finished = True
        return {
            "console": console,
            "runs": runs,
            "start_seconds": start_seconds,
            "start_per_s": len(rest) / start_calls_seconds,
            "floor_start_per_s": runs / floor_start_seconds,
            "worker_rss_mb": worker_rss,
            "worker_rss_after_mb": _rss_mb(worker.pid),
            "server_rss_mb": server_rss,
            "history_bytes_first": history_first,
            "history_bytes_last": history_last,
            "resume_p50_at_scale": percentile(at_scale, 50),
            "resume_p95_at_scale": percentile(at_scale, 95),
            "resume_p50_at_10": percentile(at_first, 50),  # the key older results used, kept
            "resume_p95_at_first": percentile(at_first, 95),
            "first": FIRST,
            "resume": resume,
            "floor_resume": floor_resume,
        }
    finally:
        if not finished:  # a failure left runs of both sides waiting (a reused stack keeps them)
            await bounded(40, [partial(_terminate, client, run_id) for run_id in run_ids + floor_ids])
        for process in (worker, floor_worker):
            process.terminate()
            await process.wait()


async def _terminate(client: Client, run_id: str) -> None:
    with contextlib.suppress(Exception):  # already ended, or never started
        await client.get_workflow_handle(run_id).terminate("benchmark over")
