"""What the migration section reads around a batch: a worker's RSS through it, history sizes
before and after, the payloads a move carries, and counts from visibility once they settle."""

from __future__ import annotations

import asyncio
import contextlib
import time
from functools import partial
from typing import Any

import psutil  # type: ignore[import-untyped]
from temporalio.client import Client

from bench.jobs import bounded

# (first generation's run id, its events, its bytes), by workflow id
Sizes = dict[str, tuple[str, int, int]]
# Started, task scheduled, started, completed: a run's first workflow task is done.
FIRST_TASK_DONE = 4


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

    def figures(self) -> dict[str, float]:
        """Before the batch, the peak during it, and right after it, in MB."""
        return {"before": round(self.before), "peak": round(max(self.samples)), "after": round(self.after)}


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
