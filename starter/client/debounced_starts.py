"""Starting a run of a debounced definition: the start joins its key value's batch instead.

Each start goes to its key value's debouncer (`workflows/engine/debouncer.py`) in one step that
creates it if needed (update-with-start), and is told the id of the run its batch becomes. The
run starts once the key value has had no start for the definition's ``period``.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING, Any

from temporalio.client import WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from dsmo.starter.client.client_errors import InvalidInputDocument
from dsmo.starter.client.flow_starts import StartReport
from dsmo.workflows.contracts.run_records import ExecutionRequest
from dsmo.workflows.definition.flow_control import FlowControlError, render_key
from dsmo.workflows.engine.debouncer import DebounceAnswer, DebounceState

if TYPE_CHECKING:  # the client calls this module; it names the client only in annotations
    from dsmo.starter.client.dsmo_client import DsmoClient

# A debouncer may end (idle) just as a start reaches it: the start is sent again, this often at most.
TRIES = 3


def debounced(request: ExecutionRequest) -> bool:
    """Whether a start of ``request`` joins a batch (a new run of a debounced definition)."""
    return request.definition.debounce is not None and request.replay is None and request.checkpoint is None


def debouncer_id(agent: str, key: str) -> str:
    """The id of one key value's debouncer."""
    return f"dsmo-debounce.{agent}.{hashlib.sha256(key.encode()).hexdigest()[:24]}"


async def join_batch(dsmo: DsmoClient, request: ExecutionRequest, task_queue: str) -> StartReport:
    """Send the start to its key value's batch; the run it becomes, and how many starts it gathered.

    Raises:
        InvalidInputDocument: The input lacks the value the debounce key reads.
    """
    definition = request.definition
    debounce = definition.debounce
    assert debounce is not None
    try:
        key = render_key("debounce.key", debounce.key, request.input)
    except FlowControlError as err:
        raise InvalidInputDocument(f"input: {err}") from None
    ask: dict[str, Any] = {"input": request.input, "definition": definition.model_dump(mode="json", exclude_none=True)}
    for attempt in range(1, TRIES + 1):
        operation: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            "StartDebouncer",
            DebounceState(definition=definition, key=key),
            id=debouncer_id(definition.agent, key),
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        try:
            answer: DebounceAnswer = await dsmo.temporal.execute_update_with_start_workflow(
                "add", ask, start_workflow_operation=operation, result_type=DebounceAnswer
            )
            return StartReport(answer.run_id, "debounced", gathered=answer.gathered)
        except (WorkflowUpdateFailedError, RPCError):
            if attempt == TRIES:
                raise
            await asyncio.sleep(0.1 * attempt)  # the debouncer was ending as the start came: ask the next one
    raise AssertionError("unreachable")
