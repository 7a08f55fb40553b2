"""A process kept running as a process manager (systemd, Kubernetes) keeps it: restarted 1 s after
it dies, whatever killed it, with its deaths counted.

Table 1's stage executors run under it in every mode: B3's worker process (`bench.b3_process`) and
each of B1's, B1''s and B2's consumer processes (`bench.queue_modes`); so do W6's contender
runners (`bench.studies.peers.peer_bench`). An executor that reaches a
planned crash point SIGKILLs itself; `Deaths` tells those kills from other exits (an error), so
the table can say how many real crashes each mode went through.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from dataclasses import dataclass, field
from pathlib import Path

from bench.cpu import cpu_seconds

RESTART_AFTER_S = 1.0
STOP_GRACE_S = 15.0


@dataclass
class Deaths:
    """How the processes of one supervisor died: by SIGKILL (a crash) or by any other exit."""

    kills: int = 0
    exits: int = 0

    def count(self, returncode: int) -> None:
        """Count one death from the process's return code (``-9``: killed by SIGKILL)."""
        if returncode == -signal.SIGKILL:
            self.kills += 1
        else:
            self.exits += 1

    @property
    def total(self) -> int:
        """Every death, each followed by a restart while the supervisor runs."""
        return self.kills + self.exits


@dataclass
class Supervised:
    """One process, restarted `RESTART_AFTER_S` after each death until `stop`.

    Attributes:
        argv: The command line (its first item the executable).
        env: The whole environment of the process.
        log_file: Where its output goes (appended; None: the bench's own output).
        restart_after: Seconds between a death and the restart.
    """

    argv: list[str]
    env: dict[str, str]
    log_file: Path | None = None
    restart_after: float = RESTART_AFTER_S
    deaths: Deaths = field(default_factory=Deaths)
    restarts: int = 0
    process: asyncio.subprocess.Process | None = None
    _stopping: bool = False
    _watcher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the process and the watcher that restarts it."""
        await self._spawn()
        self._watcher = asyncio.create_task(self._watch())

    @property
    def pid(self) -> int | None:
        """The live process's pid (None while it is down)."""
        running = self.process is not None and self.process.returncode is None
        return self.process.pid if running and self.process is not None else None

    async def _spawn(self) -> None:
        output = self.log_file.open("ab") if self.log_file is not None else None
        try:
            self.process = await asyncio.create_subprocess_exec(*self.argv, env=self.env, stdout=output, stderr=output)
        finally:
            if output is not None:
                output.close()

    async def _watch(self) -> None:
        while not self._stopping:
            assert self.process is not None
            returncode = await self.process.wait()
            if self._stopping:
                return
            self.deaths.count(returncode)
            await asyncio.sleep(self.restart_after)
            if self._stopping:
                return
            self.restarts += 1
            await self._spawn()

    def kill(self) -> None:
        """SIGKILL the process now (the watcher counts the death and restarts it)."""
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGKILL)

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system) the live process has used; 0 while it is down."""
        return cpu_seconds(self.pid)

    async def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after `STOP_GRACE_S`) and stop restarting it."""
        self._stopping = True
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        process = self.process
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), STOP_GRACE_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGKILL)
            await process.wait()
