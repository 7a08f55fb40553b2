"""The reference for moving waiting runs: the bare Temporal equivalent of a DSMO move.

A plain workflow waits on a condition; one update, carrying a payload the size of DSMO's
`migrate` request, makes it continue as new carrying a state blob the size of DSMO's checkpoint,
and its next generation waits again. Served by its own worker process
(`python -m bench.studies.migrate.migration_bare ADDRESS NAMESPACE TASK_QUEUE SLOTS`) with the settings a DSMO
worker runs with (no sandbox, the same workflow-task slots, passed in so that this process loads
nothing of DSMO's), so both sides' workers are measured the same way.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

WORKFLOW = "BenchBareMove"
UPDATE = "move"


@workflow.defn(name=WORKFLOW, sandboxed=False)
class BareMove:
    """Waits until moved; a move continues as new carrying ``state`` (a blob the checkpoint's size)."""

    def __init__(self) -> None:
        self.moved_to: int | None = None

    @workflow.run
    async def run(self, state: dict[str, Any]) -> None:
        await workflow.wait_condition(lambda: self.moved_to is not None)
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new({**state, "generation": self.moved_to})

    @workflow.update(name=UPDATE)
    def move(self, request: dict[str, Any]) -> str:
        """Accept the move (the workflow continues as new once the handler has answered)."""
        self.moved_to = int(str(request["generation"]))
        return workflow.info().run_id

    @move.validator
    def _check_move(self, request: dict[str, Any]) -> None:
        # As DSMO's validator does, refuse before anything is written; here only a malformed ask.
        if "generation" not in request:
            raise ValueError("generation: missing")


async def serve(address: str, namespace: str, task_queue: str, slots: int) -> None:
    client = await Client.connect(address, namespace=namespace)
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[BareMove],
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_concurrent_workflow_tasks=slots,
    )
    await worker.run()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
