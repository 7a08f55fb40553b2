"""Deleting Temporal executions for good: each asked for, then waited for until Temporal no longer serves it.

Temporal deletes in the background and serves the history meanwhile (13-36 s on the dev server,
once about 4 minutes). Erasure deletes a subject's runs with it, every
continue-as-new generation (`activities/run_generations.py` finds them) and every helper workflow a
run left (a compensation's durable retry).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import (
    DeleteWorkflowExecutionRequest,
    DescribeWorkflowExecutionRequest,
    GetWorkflowExecutionHistoryRequest,
)
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from dsmo.workflows.contracts.run_records import ExecutionResult
from dsmo.workflows.saga.compensation_retry import retry_id

# How long deleting waits for Temporal to stop serving a deleted history.
HISTORY_GONE_SECONDS = 600.0

Execution = tuple[str, str]  # (workflow id, run id)
# What Temporal answers about an execution while it deletes it (seen on the dev server: "operation
# was canceled"): not gone yet, ask again.
MID_DELETION = (RPCStatusCode.CANCELLED, RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)


async def delete_execution(client: Client, execution: Execution) -> bool:
    """Ask Temporal to delete one execution; False if it has none (deleted by an earlier erasure)."""
    workflow_id, run_id = execution
    request = DeleteWorkflowExecutionRequest(
        namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id)
    )
    try:
        await client.workflow_service.delete_workflow_execution(request)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False  # deleted by an earlier erasure that stopped halfway
        raise
    return True


async def until_gone(
    client: Client, executions: list[Execution], *, limit: float = HISTORY_GONE_SECONDS
) -> list[Execution]:
    """Wait (at most ``limit`` seconds) until Temporal serves none of these executions' histories.

    Returns:
        Those it still served at the deadline.
    """
    deadline = time.monotonic() + limit
    left = list(executions)
    while left:
        served = await asyncio.gather(*(history_served(client, execution) for execution in left))
        left = [each for each, still in zip(left, served, strict=True) if still]
        if not left or time.monotonic() > deadline:
            break
        await asyncio.sleep(1.0)
    return left


async def history_served(client: Client, execution: Execution) -> bool:
    """Whether Temporal still serves the execution's history (or its description)."""
    workflow_id, run_id = execution
    target = WorkflowExecution(workflow_id=workflow_id, run_id=run_id)
    try:
        await client.workflow_service.describe_workflow_execution(
            DescribeWorkflowExecutionRequest(namespace=client.namespace, execution=target), retry=False
        )
        return True
    except RPCError as err:
        if err.status in MID_DELETION:
            return True
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
    try:
        await client.workflow_service.get_workflow_execution_history(
            GetWorkflowExecutionHistoryRequest(namespace=client.namespace, execution=target, maximum_page_size=1),
            retry=False,
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        if err.status in MID_DELETION:
            return True
        raise
    return True


def retried_by(record: ExecutionResult | None) -> list[str]:
    """The compensation retries a run's final record names (``compensation.failed[].retriedBy``)."""
    failed = (record.compensation or {}).get("failed", []) if record is not None else []
    return [str(each["retriedBy"]) for each in failed if isinstance(each, dict) and each.get("retriedBy")]


async def compensation_retries(
    client: Client, run_id: str, named: Sequence[str] = ()
) -> tuple[list[Execution], list[str]]:
    """The durable retries of compensations ``run_id`` left: their task (with the step's output)
    is in their input and memo. Found by visibility and by ``named`` (the ids the run's own record
    names, so one visibility has not indexed yet is found too).

    Returns:
        The executions that have ended, and the ids of those still retrying (Temporal's own word).
    """
    ended: list[Execution] = []
    retrying: list[str] = []
    rows: dict[Execution, WorkflowExecutionStatus | None] = {}
    query = f"WorkflowType = 'CompensationRetry' AND WorkflowId STARTS_WITH '{retry_id(run_id, '')}'"
    async for row in client.list_workflows(query):
        rows[(row.id, row.run_id)] = row.status
    for retry in named:
        try:
            described = await client.get_workflow_handle(retry).describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            continue  # deleted by an earlier erasure
        rows[(described.id, described.run_id)] = described.status
    for (workflow_id, execution), listed in rows.items():
        status = listed
        if status is WorkflowExecutionStatus.RUNNING:  # visibility lags an end: ask Temporal
            status = (await client.get_workflow_handle(workflow_id, run_id=execution).describe()).status
        if status is WorkflowExecutionStatus.RUNNING:
            retrying.append(workflow_id)
        else:
            ended.append((workflow_id, execution))
    return ended, retrying
