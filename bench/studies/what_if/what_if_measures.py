"""The what-if section's measures: wall time and CPU by process over phases, visibility counts,
history sizes, messages in the file channel's outbox, the counting agent's calls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]

from bench.cpu import CpuMeter, per_run_ms
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings

# The counting agent the section's worker loads (`bench.studies.what_if.what_if_agents`), and the file it counts in.
AGENT, VERSION = "bench-whatif-profile", "1.0.0"
CALLS_FILE = "DSMO_BENCH_CALLS_FILE"


class Meter:
    """Wall time and CPU per role (worker, Temporal, S3 store, this process) over measured phases."""

    def __init__(self, settings: Settings, worker_pid: int) -> None:
        self.cpu = CpuMeter.for_stack(settings)
        self.cpu.processes["worker"] = psutil.Process(worker_pid)
        self.seconds = 0.0
        self.ms: dict[str, float] = {}

    async def phase(self, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``work``, adding its wall time and its CPU to the totals."""
        before = self.cpu.sample()
        began = time.perf_counter()
        result = await work()
        self.seconds += time.perf_counter() - began
        for role, ms in per_run_ms(before, self.cpu.sample(), 1).items():
            self.ms[role] = self.ms.get(role, 0.0) + ms
        return result

    def figures(self, runs: int) -> dict[str, Any]:
        """Seconds, runs per second and CPU ms per run by role."""
        return {
            "seconds": round(self.seconds, 2),
            "runs_per_second": round(runs / self.seconds, 1),
            "cpu_ms_per_run": {role: round(ms / runs, 2) for role, ms in self.ms.items()},
        }


async def settled(dsmo: DsmoClient, query: str, expected: int) -> None:
    """Poll visibility every 0.2 s until ``expected`` runs match ``query`` (it lags the runs a little)."""
    timeout = max(120.0, expected / 2)
    deadline = time.monotonic() + timeout
    while (await dsmo.temporal.count_workflows(query)).count < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{query}: fewer than {expected} runs after {timeout:.0f} s")
        await asyncio.sleep(0.2)


async def history_of(dsmo: DsmoClient, run_ids: list[str]) -> dict[str, float]:
    """The mean events and bytes of the runs' histories (ended: their whole history)."""
    sizes = []
    for run_id in run_ids:
        info = (await dsmo.temporal.get_workflow_handle(run_id).describe()).raw_description.workflow_execution_info
        sizes.append((info.history_length, info.history_size_bytes))
    count = max(1, len(sizes))
    return {
        "events": round(sum(events for events, _ in sizes) / count, 1),
        "bytes": round(sum(size for _, size in sizes) / count),
    }


def messages_in(folder: Path) -> int:
    """Messages the file channel wrote under ``folder`` (one JSON file each)."""
    return sum(1 for _ in folder.rglob("*.json")) if folder.exists() else 0


def calls(path: str) -> list[str]:
    """The run ids of every call the counting agent took so far, one per call."""
    try:
        with open(path, encoding="utf-8") as lines:
            return [line.strip() for line in lines if line.strip()]
    except FileNotFoundError:
        return []
