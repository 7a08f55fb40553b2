"""What the migration section reads around a batch: the time, a worker's RSS and every process's
CPU through it, history sizes before and after, the payloads a move carries, and counts from
visibility once they settle."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

import psutil  # type: ignore[import-untyped]
from temporalio.client import Client

from bench.cpu import CpuMeter, per_run_ms
from bench.jobs import bounded
from dsmo.config.settings import Settings

# (first generation's run id, its events, its bytes), by workflow id
Sizes = dict[str, tuple[str, int, int]]
# Started, task scheduled, started, completed: a run's first workflow task is done.
FIRST_TASK_DONE = 4
SAMPLE = 20  # runs per side whose history growth is read
T = TypeVar("T")


class RssSampler:
    """A process's resident memory, sampled every ``interval`` seconds while the block runs."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self.process_ = psutil.Process(pid)
        self.interval = interval
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def _rss_mb(self) -> float:
        return float(self.process_.memory_info().rss) / 1_000_000

    async def _sample(self) -> None:
        while True:
            self.samples.append(self._rss_mb())
            await asyncio.sleep(self.interval)

    async def __aenter__(self) -> RssSampler:
        self.before = self._rss_mb()
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self.samples.append(self._rss_mb())
        self.after = self.samples[-1]


class Side:
    """One side's measurements over its batches (one, or several with the machine's other work between).

    Time, CPU and runs add up over the batches; RSS is the worker's before the first, its peak
    in any, and after the last; history growth is read for a sample spread over all the runs.
    """

    def __init__(self, settings: Settings, client: Client, run_ids: list[str], worker_pid: int) -> None:
        self.client = client
        self.run_ids = run_ids
        self.worker_pid = worker_pid
        self.meter = CpuMeter.for_stack(settings)
        self.meter.processes["worker"] = psutil.Process(worker_pid)
        self.sample = run_ids[:: max(1, len(run_ids) // SAMPLE)][:SAMPLE]
        self.seconds = 0.0
        self.cpu: dict[str, float] = {}
        self.rss: list[RssSampler] = []
        self.before: Sizes = {}

    async def batch(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run one batch, measured."""
        if not self.before:
            self.before = await history_sizes(self.client, self.sample)
        cpu_before = self.meter.sample()
        async with RssSampler(self.worker_pid) as rss:
            began = time.perf_counter()
            result = await work()
            self.seconds += time.perf_counter() - began
        for role, ms in per_run_ms(cpu_before, self.meter.sample(), 1).items():
            self.cpu[role] = self.cpu.get(role, 0.0) + ms
        self.rss.append(rss)
        return result

    async def figures(self, moved: str, expected: int) -> dict[str, Any]:
        """Rate, RSS, CPU per run, history growth, and how many runs visibility shows ``moved``."""
        runs = len(self.run_ids)
        return {
            "seconds": round(self.seconds, 2),
            "batches": len(self.rss),
            "runs_per_second": round(runs / self.seconds, 1),
            "moved_visible": await settled_count(self.client, moved, expected, timeout=120),
            "worker_rss_mb": {
                "before": round(self.rss[0].before),
                "peak": round(max(max(rss.samples) for rss in self.rss)),
                "after": round(self.rss[-1].after),
            },
            "cpu_ms_per_run": {role: round(ms / runs, 2) for role, ms in self.cpu.items()},
            "history": await growth(self.client, self.before),
        }


async def _size(client: Client, workflow_id: str, run_id: str | None = None) -> tuple[str, int, int]:
    info = (await client.get_workflow_handle(workflow_id, run_id=run_id).describe()).raw_description
    execution = info.workflow_execution_info
    return execution.execution.run_id, execution.history_length, execution.history_size_bytes


async def history_sizes(client: Client, workflow_ids: list[str]) -> Sizes:
    """Each workflow's current run: its id, its events and its bytes (read before a move)."""
    sizes = await bounded(10, [partial(_size, client, w) for w in workflow_ids])
    return dict(zip(workflow_ids, sizes, strict=True))


async def growth(client: Client, before: Sizes) -> dict[str, Any]:
    """What a move added: events and bytes of the old generation, and the new generation's size.

    The new generation is waiting again when this is read, so its history is its first workflow
    task's (the moved run's start, that task and the commands it sent).
    """
    old, new = [], []
    for workflow_id, (run_id, events, size) in before.items():
        _, events_after, size_after = await _size(client, workflow_id, run_id)
        old.append((events_after - events, size_after - size))
        new_size = await _first_task_done(client, workflow_id, run_id)
        if new_size is not None:
            new.append(new_size)
    return {
        "sampled": len(before),
        "moved_in_sample": len(new),
        "old_generation_events_added": _mean([e for e, _ in old]),
        "old_generation_bytes_added": _mean([b for _, b in old]),
        "new_generation_events": _mean([e for e, _ in new]),
        "new_generation_bytes": _mean([b for _, b in new]),
    }


def _mean(values: list[int]) -> float:
    return round(sum(values) / len(values), 1) if values else float("nan")


async def _first_task_done(client: Client, workflow_id: str, old_run: str) -> tuple[int, int] | None:
    """The new generation's events and bytes once its first workflow task completed; None if none."""
    for _ in range(100):
        run_id, events, size = await _size(client, workflow_id)
        if run_id == old_run:
            return None
        if events >= FIRST_TASK_DONE:
            return events, size
        await asyncio.sleep(0.1)
    raise TimeoutError(f"run {workflow_id}: the first workflow task of its new generation did not complete")


async def move_payload_bytes(client: Client, workflow_id: str) -> tuple[int, int]:
    """The bytes of a moved run's update request and of the state it continued as new with.

    Read from its first generation's history: the accepted update's input and the
    continue-as-new's input (the checkpoint, with the target definition).
    """
    latest = (await client.get_workflow_handle(workflow_id).describe()).raw_description.workflow_execution_info
    history = await client.get_workflow_handle(workflow_id, run_id=latest.first_run_id).fetch_history()
    request = checkpoint = 0
    for event in history.events:
        if event.HasField("workflow_execution_update_accepted_event_attributes"):
            update = event.workflow_execution_update_accepted_event_attributes.accepted_request
            request = sum(len(p.data) for p in update.input.args.payloads)
        if event.HasField("workflow_execution_continued_as_new_event_attributes"):
            moved = event.workflow_execution_continued_as_new_event_attributes
            checkpoint = sum(len(p.data) for p in moved.input.payloads)
    if not (request and checkpoint):
        raise RuntimeError(f"run {workflow_id}: no accepted update and continue-as-new in its first generation")
    return request, checkpoint


async def settled_count(client: Client, query: str, expected: int, *, timeout: float) -> int:
    """Visibility's count for ``query``, polled until it reaches ``expected`` (it lags) or ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        count = (await client.count_workflows(query)).count
        if count >= expected or time.monotonic() > deadline:
            return count
        await asyncio.sleep(1)
