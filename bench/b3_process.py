"""Table 1's B3 worker as a supervised process, and its driver's calls that ride out a Temporal restart.

The worker (`bench.b3_worker`) serves Table 1's task queue only; the bench's in-process workers
keep serving the floor comparison (whose B3 side times stages by an in-memory log) and the
timer probe. A crash point SIGKILLs the worker process; the supervisor (`bench.supervisor`)
starts another a second later.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from temporalio.service import RPCError

from bench.paths import REPO
from bench.supervisor import Supervised
from dsmo.client.client_errors import RunNotFound
from dsmo.config.settings import Settings
from dsmo.runtime.provisioning import worker_polling
from dsmo.workflows.common.errors import DsmoError

T = TypeVar("T")
UP_TIMEOUT_S = 90.0
# A call to Temporal is tried again for this long: through a restart of the server (seconds) or
# of the worker (its supervisor's second and the process's start-up), never longer.
RIDE_OUT_S = 120.0


@contextlib.asynccontextmanager
async def b3_worker(
    settings: Settings, *, dsn: str, seed: int, task_queue: str, slots: int
) -> AsyncIterator[Supervised]:
    """The B3 worker on ``task_queue``, supervised, once it polls; stopped on the way out."""
    env = {
        **os.environ,
        **settings.to_env(),
        # The harness is not installed (only `dsmo` is): the worker finds `bench` in the repository.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    argv = [sys.executable, "-m", "bench.b3_worker", "--dsn", dsn, "--seed", str(seed)]
    argv += ["--task-queue", task_queue, "--slots", str(slots)]
    logs = settings.state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    process = Supervised(argv, env, log_file=logs / "bench-b3-worker.log")
    await process.start()
    try:
        await _polling(settings.with_changes(temporal={"task_queue": task_queue}), process)
        yield process
    finally:
        await process.stop()


async def _polling(settings: Settings, process: Supervised) -> None:
    deadline = time.monotonic() + UP_TIMEOUT_S
    while time.monotonic() < deadline:
        pid = process.pid
        if pid is not None and await worker_polling(settings, pid):
            return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"the B3 worker did not poll within {UP_TIMEOUT_S:.0f} s; see {process.log_file}")


def transient(err: BaseException) -> bool:
    """Whether a failed call may succeed once Temporal or the worker is back: a transport error
    or the client's word for one (unavailable, no worker, a workflow task timing out after a
    kill); never a run that does not exist."""
    return isinstance(err, RPCError) or (isinstance(err, DsmoError) and not isinstance(err, RunNotFound))


async def riding_out(call: Callable[[], Awaitable[T]], *, limit: float = RIDE_OUT_S) -> T:
    """``call()``, again every second while it fails with a `transient` error, for ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while True:
        try:
            return await call()
        except Exception as err:
            if not transient(err) or time.monotonic() > deadline:
                raise
        await asyncio.sleep(1.0)
