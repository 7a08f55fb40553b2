"""Asking one of flow control's small workflows (a key's lock, a debouncer) something, creating it if needed.

One call does both (Temporal's update-with-start). A busy workflow refuses more updates than it
has room for in flight (10 on a dev server), and one that is ending or continuing as new drops
the update: each is asked again, after a short random wait that grows, for a few seconds. A
client sends one workflow at most `IN_FLIGHT` requests at once: the others wait their turn in
the client rather than be refused and asked again, which costs the server far more.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from temporalio.client import Client, WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from dsmo.client.client_errors import FlowControlBusy
from dsmo.client.connection import first_line

T = TypeVar("T")

# How long a request keeps being asked again, and the first and longest waits between tries.
PATIENCE_SECONDS = 15.0
FIRST_WAIT, LONGEST_WAIT = 0.05, 1.0
IN_FLIGHT = 8  # requests one client process has in flight to one workflow (the server takes 10 updates)


class UpdateGates:
    """Per workflow id, how many of this client's requests are in flight; a gate is dropped once idle."""

    def __init__(self, limit: int = IN_FLIGHT) -> None:
        self.limit = limit
        self._gates: dict[str, tuple[asyncio.Semaphore, int]] = {}

    @contextlib.asynccontextmanager
    async def passing(self, workflow_id: str) -> AsyncIterator[None]:
        """Hold one of ``workflow_id``'s places while the body runs."""
        gate, users = self._gates.get(workflow_id) or (asyncio.Semaphore(self.limit), 0)
        self._gates[workflow_id] = (gate, users + 1)
        try:
            async with gate:
                yield
        finally:
            gate, users = self._gates[workflow_id]
            if users == 1:
                del self._gates[workflow_id]
            else:
                self._gates[workflow_id] = (gate, users - 1)


async def update_with_start(
    temporal: Client,
    gates: UpdateGates,
    workflow: str,
    state: Any,
    workflow_id: str,
    task_queue: str,
    update: str,
    arg: Any,
    result_type: type[T],
    *,
    what: str,
    long_lived: bool = False,
    update_id: str | None = None,
) -> T:
    """``update`` on ``workflow_id`` (started with ``state`` if not running); its answer.

    A ``long_lived`` workflow (a key lock) is usually running: it is asked with a plain update
    first, which costs the server less than update-with-start, and started only if it is not.
    An ``update_id`` asked again of the same workflow run is answered as the first time, not
    applied twice (Temporal deduplicates an execution's updates by id).

    Raises:
        FlowControlBusy: It did not take the request for `PATIENCE_SECONDS` (``what`` names it).
    """
    if long_lived:
        # Not running, or busy: asked again as below (a claim is idempotent). A lock whose worker
        # died mid-task answers once Temporal hands the task to another: as update-with-start would.
        with contextlib.suppress(RPCError, WorkflowUpdateFailedError):
            async with gates.passing(workflow_id):
                running: T = await temporal.get_workflow_handle(workflow_id).execute_update(
                    update, arg, id=update_id, result_type=result_type
                )
            return running
    loop = asyncio.get_running_loop()
    give_up, wait = loop.time() + PATIENCE_SECONDS, FIRST_WAIT
    while True:
        operation: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            workflow,
            state,
            id=workflow_id,
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        try:
            async with gates.passing(workflow_id):
                answer: T = await temporal.execute_update_with_start_workflow(
                    update, arg, id=update_id, start_workflow_operation=operation, result_type=result_type
                )
            return answer
        except (WorkflowUpdateFailedError, RPCError) as err:
            with contextlib.suppress(Exception):  # the start's handle failed the same way: read it
                await operation.workflow_handle()
            if loop.time() + wait > give_up:
                raise FlowControlBusy(
                    f"{what}: {workflow_id} did not take the start ({first_line(err)}); try again"
                ) from None
        await asyncio.sleep(wait * (0.5 + random.random()))
        wait = min(wait * 2, LONGEST_WAIT)
