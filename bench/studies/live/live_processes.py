"""The live-stream study's processes and their meters: a `dsmo worker` and a `dsmo serve` of
their own, each measured by pid, beside the stack's servers (`bench.cpu`).

CPU is user + system seconds per process over a phase; memory is each process's resident set,
sampled every `SAMPLE_SECONDS` while the phase runs (its peak, and what it was as the phase began).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psutil  # type: ignore[import-untyped]

from bench.cpu import CpuMeter
from dsmo.config.settings import Settings
from dsmo.devstack.stack import free_port_block

SAMPLE_SECONDS = 0.25
AGENTS_MODULE = "bench.studies.live.live_agents"
WORKER_ACTIVITIES = 200  # activity slots: the agents sleep, so every run's stage may run at once


async def _spawn(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, *args, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


@contextlib.asynccontextmanager
async def worker_process(settings: Settings, queue: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """A `dsmo worker` process on ``queue`` with the study's agents loaded, stopped on exit."""
    env = {
        **os.environ,
        **settings.to_env(),
        "DSMO_TASK_QUEUE": queue,
        "DSMO_METRICS_BIND": "off",
        "DSMO_LOAD": AGENTS_MODULE,
        "DSMO_MAX_CONCURRENT_ACTIVITIES": str(WORKER_ACTIVITIES),
    }
    process = await _spawn(env, "-m", "dsmo.worker")
    try:
        yield process
    finally:
        await _stop(process)


@contextlib.asynccontextmanager
async def ingress_process(settings: Settings, keys_file: Path) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """A `dsmo serve` process with ``keys_file``'s keys on a free port: (the process, its URL)."""
    port = free_port_block(1)
    env = {**os.environ, **settings.to_env(), "DSMO_API_KEYS_FILE": str(keys_file)}
    process = await _spawn(env, "-m", "dsmo.cli.main", "serve", "--bind", f"127.0.0.1:{port}")
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as probe:
            for _ in range(300):
                with contextlib.suppress(httpx.TransportError):
                    await probe.get(f"{url}/openapi.json")
                    break
                if process.returncode is not None:
                    raise RuntimeError(f"live study: dsmo serve exited {process.returncode}")
                await asyncio.sleep(0.1)
            else:
                raise RuntimeError("live study: dsmo serve did not answer in 30 s")
        yield process, url
    finally:
        await _stop(process)


class PhaseMeter:
    """CPU seconds and resident memory by role over one phase.

    Args:
        settings: the stack (its Temporal server and S3 store are found by port).
        pids: the study's own processes by role (``worker``, ``ingress``).
    """

    def __init__(self, settings: Settings, pids: dict[str, int]) -> None:
        self.cpu = CpuMeter.for_stack(settings)
        for role, pid in pids.items():
            self.cpu.processes[role] = psutil.Process(pid)
        self.rss_start: dict[str, int] = {}
        self.rss_peak: dict[str, int] = {}
        self.cpu_s: dict[str, float] = {}
        self.seconds = 0.0

    def _rss(self) -> dict[str, int]:
        sizes = {}
        for role, process in self.cpu.processes.items():
            with contextlib.suppress(psutil.Error):
                sizes[role] = int(process.memory_info().rss)
        return sizes

    async def _sample(self) -> None:
        while True:
            for role, size in self._rss().items():
                self.rss_peak[role] = max(self.rss_peak.get(role, 0), size)
            await asyncio.sleep(SAMPLE_SECONDS)

    @contextlib.asynccontextmanager
    async def measuring(self) -> AsyncIterator[None]:
        """Measure what runs inside: wall seconds, CPU by role, RSS at the start and its peak."""
        self.rss_start = self._rss()
        sampler = asyncio.create_task(self._sample())
        before, began = self.cpu.sample(), time.perf_counter()
        try:
            yield
        finally:
            self.seconds = time.perf_counter() - began
            after = self.cpu.sample()
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
            for role, size in self._rss().items():
                self.rss_peak[role] = max(self.rss_peak.get(role, 0), size)
            self.cpu_s = {role: after[role] - before[role] for role in before if role in after}

    def figures(self) -> dict[str, Any]:
        """``seconds``, ``cpu_s`` by role, ``rss_start_kib`` and ``rss_peak_kib`` by role."""
        return {
            "seconds": round(self.seconds, 2),
            "cpu_s": {role: round(value, 3) for role, value in self.cpu_s.items()},
            "rss_start_kib": {role: size // 1024 for role, size in self.rss_start.items()},
            "rss_peak_kib": {role: size // 1024 for role, size in self.rss_peak.items()},
        }
