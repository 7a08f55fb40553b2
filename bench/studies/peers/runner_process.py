"""A contender's runner process, as the driver sees it: started, killed, restarted after 1 s.

Runners kill themselves where the fault plan says; the supervisor notices the exit and starts a
new one a second later, as a process manager (systemd, Kubernetes) would.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import psutil  # type: ignore[import-untyped]

RESTART_AFTER_S = 1.0


class RunnerProcess:
    """One runner at a time, restarted whenever it dies until `stop`."""

    def __init__(self, argv: list[str], env: dict[str, str], log_file: Path) -> None:
        self.argv = argv
        self.env = env
        self.log_file = log_file
        self.process: asyncio.subprocess.Process | None = None
        self.restarts = 0
        self._stopping = False
        self._supervisor: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._spawn()
        self._supervisor = asyncio.create_task(self._supervise())

    async def _spawn(self) -> None:
        log = self.log_file.open("ab")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, *self.argv, env={**os.environ, **self.env}, stdout=log, stderr=log
        )
        log.close()

    async def _supervise(self) -> None:
        while not self._stopping:
            assert self.process is not None
            await self.process.wait()
            if self._stopping:
                return
            await asyncio.sleep(RESTART_AFTER_S)
            if self._stopping:
                return
            self.restarts += 1
            await self._spawn()

    def kill(self) -> None:
        """SIGKILL the runner now (the supervisor restarts it)."""
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGKILL)

    def pid(self) -> int | None:
        return self.process.pid if self.process is not None and self.process.returncode is None else None

    def cpu_seconds(self) -> float:
        pid = self.pid()
        if pid is None:
            return 0.0
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:
            return 0.0
        return float(times.user + times.system)

    async def stop(self) -> None:
        self._stopping = True
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 15)
            except TimeoutError:
                self.kill()
                await self.process.wait()
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
