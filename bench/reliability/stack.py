"""A private embedded stack whose parts a scenario can crash, stop and bring back."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from bench.paths import REPO
from dsmo.client.dsmo_client import DsmoClient
from dsmo.devstack.processes import ManagedProcess
from dsmo.devstack.stack import DevStack, dev_plugins_env, private_settings

TASK_QUEUE = "reliability"
# Held stages wait on the worker's event loop, holding a slot but no thread: room for every run
# of a scenario to be held at once, beside the activities that start and end runs.
ACTIVITY_SLOTS = 1024


class FaultStack(DevStack):
    """Temporal, SeaweedFS and a worker process (with the slow agent) on free ports of their own.

    Never the developer's stack: a scenario kills processes, so it only ever kills its own.
    """

    def __init__(self, state_dir: Path) -> None:
        settings = private_settings(state_dir).with_changes(
            temporal={"task_queue": TASK_QUEUE}, worker={"max_concurrent_activities": ACTIVITY_SLOTS}
        )
        super().__init__(settings)
        self.execution_log = state_dir / "executions.jsonl"

    def _worker_argv(self) -> list[str]:
        return [sys.executable, "-m", "bench.reliability.worker", "--log", str(self.execution_log)]

    def _worker_env(self) -> dict[str, str]:
        # The harness is not installed (only `dsmo` is): the worker finds `bench` in the repository.
        return {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}

    async def start(self) -> DsmoClient:
        await self.up(with_worker=True, timeout=120)
        return await DsmoClient.connect(self.settings)

    # -- faults -----------------------------------------------------------------------------

    def crash_worker(self) -> None:
        if not self.worker.kill():
            raise RuntimeError("the worker was not running")

    def crash_temporal(self) -> None:
        if not self.temporal.kill():
            raise RuntimeError("the Temporal server was not running")

    def stop_s3(self) -> None:
        if not self.s3.stop(timeout=3.0):
            raise RuntimeError("the S3 store was not running")

    def extra_worker(self, name: str) -> ManagedProcess:
        """Start one more worker process on the stack's task queue, as the stack starts its own."""
        settings = self.settings
        proc = ManagedProcess(name, settings.state_dir / "run", settings.state_dir / "logs")
        env = {**settings.to_env(), **dev_plugins_env(settings), **self._worker_env()}
        proc.start(self._worker_argv(), env=env, cwd=settings.state_dir)
        return proc

    async def restore(self) -> float:
        """Start whatever is down again (same state folder, same ports); seconds until healthy."""
        began = time.monotonic()
        await self.up(with_worker=True, timeout=120)
        return time.monotonic() - began
