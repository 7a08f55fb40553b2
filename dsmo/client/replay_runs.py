"""Starting a replay run and waiting for its end, never for good: only on a task queue a worker polls.

A replay that no worker takes in time is terminated, so `dsmo replay` and what-if fail fast with
one line and leave nothing running.
"""

from __future__ import annotations

import asyncio

from temporalio.api.enums.v1 import PendingWorkflowTaskState, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import WorkflowExecutionStatus

from dsmo.client import run_status, starts
from dsmo.client.core import ClientCore
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.run_records import ExecutionRequest, ExecutionResult

# How long a started replay may wait for a worker to take its first workflow task.
FIRST_TASK_SECONDS = 60.0
SCHEDULED = PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED


class NoWorker(DsmoError):
    """No worker polls the task queue a replay would run on (or none took it): nothing is left running."""


async def run_replay(
    core: ClientCore, request: ExecutionRequest, replay_id: str, task_queue: str | None
) -> ExecutionResult:
    """Start a replay run and wait for its end; fail fast, leaving nothing running, without a worker.

    Raises:
        NoWorker: No worker polls the task queue (nothing is started), or none took the replay's
            first workflow task within `FIRST_TASK_SECONDS` (it is terminated).
    """
    queue = task_queue or core.settings.temporal.task_queue
    await check_worker(core, queue)
    # The memo marks it a replay: webhooks and other watchers of real runs leave it alone.
    await starts.start_request(core, request, run_id=replay_id, task_queue=queue, memo={"replay": "true"})
    await _taken(core, replay_id, queue)
    return await run_status.result(core, replay_id)


async def check_worker(core: ClientCore, task_queue: str) -> None:
    """Raise `NoWorker` unless some worker polls ``task_queue`` for workflow tasks."""
    described = await core.temporal.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=core.temporal.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    if not described.pollers:
        raise NoWorker(
            f"--task-queue: no worker polls task queue {task_queue!r}; start one on it (dsmo worker) and replay "
            "again (nothing was started)"
        )


async def _taken(core: ClientCore, replay_id: str, task_queue: str) -> None:
    """Wait until a worker took the replay's first workflow task; terminate it if none does in time.

    A worker seen polling a moment ago may have gone since (Temporal remembers pollers for minutes).
    """
    handle = core.temporal.get_workflow_handle(replay_id)
    loop = asyncio.get_running_loop()
    deadline, pause = loop.time() + FIRST_TASK_SECONDS, 0.05
    while True:
        described = await handle.describe()
        waiting = described.raw_description.pending_workflow_task.state == SCHEDULED
        if described.status is not WorkflowExecutionStatus.RUNNING or described.history_length > 2 or not waiting:
            return
        if loop.time() > deadline:
            await handle.terminate(reason=f"no worker took the replay within {FIRST_TASK_SECONDS:.0f} s")
            raise NoWorker(
                f"--task-queue: no worker took replay {replay_id} on task queue {task_queue!r} within "
                f"{FIRST_TASK_SECONDS:.0f} s; it was terminated (start a worker on it and replay again)"
            )
        await asyncio.sleep(pause)
        pause = min(pause * 2, 1.0)
