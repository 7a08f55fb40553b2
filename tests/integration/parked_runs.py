"""Runs parked on a task queue of their own: started, waiting, then left with no worker polling.

What is sent to a parked run meanwhile (a reply, a move, a cancel) reaches it in one workflow task
once a worker runs again: the way to test what a task that carries several requests does.
"""

from __future__ import annotations

import asyncio
import uuid

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import UpdateWorkflowExecutionLifecycleStage
from temporalio.api.update.v1 import UpdateRef, WaitPolicy
from temporalio.api.workflowservice.v1 import PollWorkflowExecutionUpdateRequest
from temporalio.service import RPCError
from temporalio.worker import Worker

from dsmo.activities.messaging import FileChannel
from dsmo.worker import build_worker
from dsmo.workflows.contracts.migration_io import MIGRATE_UPDATE, MigrationAck, MigrationRequest
from dsmo.workflows.definition.model import AgentDefinition
from tests.conftest import Harness
from tests.integration.changes.test_cancel_racing_handover import waiting
from tests.polling import until


class ParkedRuns:
    """A task queue of the test's own, whose worker the test starts and stops."""

    def __init__(self, harness: Harness, prefix: str) -> None:
        self.harness = harness
        self.queue = f"{prefix}-{uuid.uuid4().hex[:8]}"

    def worker(self) -> Worker:
        """A worker on the queue (use it as an async context manager)."""
        harness = self.harness
        channel = FileChannel(harness.outbox)
        return build_worker(harness.dsmo.temporal, task_queue=self.queue, store=harness.store, channel=channel)

    async def park(self, definition: AgentDefinition) -> str:
        """Start a run of ``definition``, wait until it waits, and stop the worker; the run's id."""
        async with self.worker():
            run_id = (await self.harness.dsmo.start(definition, task_queue=self.queue)).run_id
            self.harness.started.append(run_id)
            await waiting(self.harness, run_id)
        return run_id

    async def park_to_move(self, v1: AgentDefinition, v2: AgentDefinition) -> tuple[str, str]:
        """Publish both versions and park a run of ``v1``; its id and its execution's Temporal run id."""
        await self.harness.dsmo.publish(v1)
        await self.harness.dsmo.publish(v2)
        run_id = await self.park(v1)
        return run_id, (await self.harness.dsmo.temporal.get_workflow_handle(run_id).describe()).run_id

    async def held_move(self, run_id: str, to: AgentDefinition) -> asyncio.Task[MigrationAck]:
        """Ask the parked run to move to ``to``; returns once the server holds the move (its answer's task)."""
        handle = self.harness.dsmo.temporal.get_workflow_handle(run_id)
        request = MigrationRequest(definition=to, reason="new wording")
        move = asyncio.create_task(handle.execute_update(MIGRATE_UPDATE, request, id="move", result_type=MigrationAck))
        await until(lambda: admitted(self.harness, run_id, "move"), "the move is held by the server")
        return move


async def admitted(harness: Harness, run_id: str, update_id: str) -> bool:
    """Whether the server holds the update (admitted: no worker has seen it yet)."""
    request = PollWorkflowExecutionUpdateRequest(
        namespace=harness.dsmo.temporal.namespace,
        update_ref=UpdateRef(workflow_execution=WorkflowExecution(workflow_id=run_id), update_id=update_id),
        wait_policy=WaitPolicy(
            lifecycle_stage=UpdateWorkflowExecutionLifecycleStage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED
        ),
    )
    try:
        await harness.dsmo.temporal.workflow_service.poll_workflow_execution_update(request)
    except RPCError:
        return False
    return True
