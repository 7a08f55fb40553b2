"""A `dsmo worker` in a process of its own, for the tests that kill one (SIGKILL: nothing it holds
is handed back) and start another to take its runs over."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from dsmo.config.settings import Settings
from dsmo.runtime.provisioning import worker_polling

BIN = Path(sys.executable).parent


async def start_worker_process(
    settings: Settings, log: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """`dsmo worker` with ``settings`` (and ``env`` on top), once it polls its task queue.

    Its stderr goes to ``log``, which an assertion shows if it dies or never polls.
    """
    process = subprocess.Popen(
        [str(BIN / "dsmo"), "worker"],
        env={**os.environ, **settings.to_env(), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=open(log, "a"),  # noqa: SIM115 - the child owns it
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not await worker_polling(settings, process.pid):
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the worker did not start polling"
        await asyncio.sleep(0.3)
    return process


def kill_worker(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker and everything it started, and wait for it to be gone."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


async def until(done: Callable[[], bool], log: Path, what: str) -> None:
    """Wait up to 60 s for ``done()``; failing, the assertion shows ``what`` and the worker's log."""
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, f"{what}: {log.read_text()}"
        await asyncio.sleep(0.1)
