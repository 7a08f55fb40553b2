"""B1, B1' and B2 on the real queue: the consumer processes, and each run's start and end.

A run starts when its first stage is enqueued and ends when its first chain ends (an agent
enqueued nothing more) or a message of it is dead-lettered. The consumers run as separate
processes (several per mode, every one competing for every stage, one stage at a time: as many
stage executors as B3's worker has activity slots); one that died is started again a second
later, as a process manager would (`bench.supervisor`), and its deaths are counted. After a
mode's runs, the bench waits for the queue to drain, so redelivered messages and duplicate chains
are executed (and logged) as they would be.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from bench.queue_db import QueueDb
from bench.supervisor import Supervised
from dsmo.activities.artifacts import ArtifactStore
from dsmo.config.settings import Settings

CONSUMERS = 4
RUN_DEADLINE_S = 60.0
WATCH_S = 0.02
DRAIN_LIMIT_S = 60.0


@dataclass
class QueueModes:
    """Runs of B1 or B2 on the queue (see the module's docstring)."""

    db: QueueDb
    dsn: str
    settings: Settings
    store: ArtifactStore
    seed: int
    ambiguity: float
    consumers: int = CONSUMERS
    drain_quiet: float = 3.0  # seconds with nothing queued: the redeliveries and duplicate chains are done
    restarts: int = 0  # deaths of consumer processes, each started again a second later
    kills: int = 0  # of those deaths, SIGKILLs (a crash point)
    _waiting: dict[str, asyncio.Future[float | None]] = field(default_factory=dict)

    @contextlib.asynccontextmanager
    async def serving(self, mode: str) -> AsyncIterator[None]:
        """The mode's consumer processes, kept at full strength, and the watcher of run endings."""
        env = {**os.environ, **self.settings.to_env()}
        names = [f"{mode}-consumer-{index}" for index in range(self.consumers)]
        processes = [Supervised(self._argv(mode, name), env) for name in names]
        for process in processes:
            await process.start()
        stop = asyncio.Event()
        watching = asyncio.create_task(self._watch(stop))
        try:
            yield
            await self._drain(mode)
        finally:
            stop.set()
            await asyncio.gather(watching, return_exceptions=True)
            await asyncio.gather(*(process.stop() for process in processes))
            self.restarts += sum(process.deaths.total for process in processes)
            self.kills += sum(process.deaths.kills for process in processes)

    def _argv(self, mode: str, name: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "bench.consumer",
            "--dsn",
            self.dsn,
            "--mode",
            mode,
            "--name",
            name,
            "--seed",
            str(self.seed),
            "--ambiguity",
            str(self.share(mode)),
        ]

    def share(self, mode: str) -> float:
        """B2's share of deviating runs: the configured one, or a sweep mode's own (``b2s05``: 5%)."""
        if mode.startswith("b2s"):
            return int(mode[3:]) / 100
        return self.ambiguity if mode == "b2" else 0.0

    async def _watch(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if self._waiting:
                ended = await asyncio.to_thread(self.db.endings, list(self._waiting))
                for run_id, at in ended.items():
                    future = self._waiting.pop(run_id, None)
                    if future is not None and not future.done():
                        future.set_result(at)
            await asyncio.sleep(WATCH_S)

    async def _drain(self, mode: str) -> None:
        deadline, quiet_since = time.monotonic() + DRAIN_LIMIT_S, time.monotonic()
        while time.monotonic() < deadline:
            if await asyncio.to_thread(self.db.pending, mode):
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= self.drain_quiet:
                return
            await asyncio.sleep(0.1)

    async def run(
        self, mode: str, workload: str, run_id: str, input_id: str, replay: int, input_uri: str
    ) -> float | None:
        """Enqueue the run's first stage; returns when it ended (None: not within the deadline)."""
        future: asyncio.Future[float | None] = asyncio.get_running_loop().create_future()
        self._waiting[run_id] = future
        await asyncio.to_thread(
            self.db.enqueue, mode, run_id, input_id, replay, workload, "A", {"uri": input_uri, "hops": 0}
        )
        try:
            return await asyncio.wait_for(future, RUN_DEADLINE_S)
        except TimeoutError:
            self._waiting.pop(run_id, None)
            return None
