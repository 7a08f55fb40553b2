"""A run whose workflow task never finishes in time must not take the worker down with it.

The real worker process serves DSMO's workflows and, on the same task queue, a workflow whose
every task spins past Temporal's 2 s deadlock timeout while logging. The SDK interrupts that
thread each time; before the worker's logging was made lock-free, an interruption landing inside
a logging call left a handler lock held and the whole worker hung for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness
from tests.integration.server.test_hostile_definitions_and_requests import costly_definition

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
DEADLOCK = "Potential deadlock detected"


async def wait_for_text(log: Path, text: str, count: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        seen = log.read_text(errors="replace").count(text) if log.exists() else 0
        if seen >= count:
            break
        await asyncio.sleep(0.25)
    return seen


async def test_slow_workflow_tasks_beside_normal_runs_leave_the_worker_serving(
    harness: Harness, tmp_path: Path
) -> None:
    queue = f"wedge-{uuid.uuid4().hex[:8]}"
    settings = harness.settings.with_changes(
        temporal={"task_queue": queue}, messaging={"outbox_dir_override": str(tmp_path / "outbox")}
    )
    log = tmp_path / "worker.log"
    env = {**os.environ, **settings.to_env(), "DSMO_WORKFLOW_SANDBOX": "off"}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.slow_task_worker"], cwd=REPO, env=env, stdout=sink, stderr=sink
        )
    slow = [f"slow-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    try:
        assert await wait_for_text(log, "worker polling", 1, 60), log.read_text(errors="replace")
        for run_id in slow:
            await harness.dsmo.temporal.start_workflow("SlowTask", id=run_id, task_queue=queue)
        # Every slow run has had at least one task interrupted by the deadlock detector.
        assert await wait_for_text(log, DEADLOCK, len(slow), 60) >= len(slow)

        definition = costly_definition()
        for _ in range(2):  # two rounds, seconds apart, while the slow tasks keep being retried
            runs = [
                (await harness.dsmo.start(definition, {"L": [1, 2, 3]}, task_queue=queue)).run_id  # type: ignore[arg-type]
                for _ in range(4)
            ]
            results = await asyncio.wait_for(asyncio.gather(*(harness.dsmo.result(r) for r in runs)), 60)
            assert all(r.status is RunStatus.COMPLETED and r.path == ["check", "done"] for r in results)
            await asyncio.sleep(3)

        assert process.poll() is None, "the worker exited"
        # The slow runs are still failing their tasks, not completed: the worker kept interrupting them.
        for run_id in slow:
            description = await harness.dsmo.temporal.get_workflow_handle(run_id).describe()
            assert description.close_time is None
        # ... and keeps doing so: another interruption comes (the timeout is a hang guard).
        assert await wait_for_text(log, DEADLOCK, len(slow) + 1, 60) > len(slow)
    finally:
        for run_id in slow:
            with contextlib.suppress(Exception):
                await harness.dsmo.temporal.get_workflow_handle(run_id).terminate("test over")
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
