"""`dsmo replay` with no worker on its task queue fails at once with one line, and leaves no replay
behind: none is started when nobody polls, and one that no worker takes is terminated."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from dsmo.activities.messaging import FileChannel
from dsmo.client import replay_runs
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.polling import until

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
HELLO = parse_definition(
    {
        "agent": "replay-worker",
        "start": "hi",
        "nodes": {"hi": {"actionType": "send_message", "parameters": {"message": "hi"}}},
    }
)


async def polled(harness: Harness, task_queue: str) -> bool:
    try:
        await replay_runs.check_worker(harness.dsmo.core, task_queue)
    except replay_runs.NoWorker:
        return False
    return True


async def test_a_replay_on_a_queue_no_worker_polls_fails_fast_and_starts_nothing(harness: Harness) -> None:
    run_id = await harness.start(HELLO)
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED
    nobody = f"nobody-{uuid.uuid4().hex[:8]}"
    done = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), "replay", run_id, "--task-queue", nobody],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr == (
        f"error: --task-queue: no worker polls task queue {nobody!r}; start one on it (dsmo worker) and replay "
        "again (nothing was started)\n"
    )
    new_id = f"{run_id}.replay-none"
    with pytest.raises(replay_runs.NoWorker, match="no worker polls"):
        await harness.dsmo.replay(run_id, task_queue=nobody, new_id=new_id)
    with pytest.raises(RPCError):
        await harness.dsmo.temporal.get_workflow_handle(new_id).describe()


async def test_a_replay_no_worker_takes_is_terminated(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = await harness.start(HELLO)
    await harness.dsmo.result(run_id)
    # A worker polled this queue a moment ago and is gone: Temporal still lists it for minutes.
    gone = f"gone-{uuid.uuid4().hex[:8]}"
    async with build_worker(harness.dsmo.temporal, task_queue=gone, store=harness.store, channel=FileChannel(tmp_path)):
        await until(lambda: polled(harness, gone), f"a poller listed on {gone}")
    assert await polled(harness, gone)
    monkeypatch.setattr(replay_runs, "FIRST_TASK_SECONDS", 2.0)
    new_id = f"{run_id}.replay-gone"
    with pytest.raises(replay_runs.NoWorker, match="no worker took replay"):
        await harness.dsmo.replay(run_id, task_queue=gone, new_id=new_id)
    described = await harness.dsmo.temporal.get_workflow_handle(new_id).describe()
    assert described.status is WorkflowExecutionStatus.TERMINATED
