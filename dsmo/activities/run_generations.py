"""A run's Temporal executions as Temporal itself records them, not as visibility has indexed them.

A DSMO run that continued as new (a long history carried over, a move, a rewind) keeps its id and
gets a new execution; each execution's first event names the one it continued from. Walking that
chain back from the current execution finds every generation at once, where a visibility query
would miss one it has not indexed yet. Erasure and the retention sweep delete what this finds.
"""

from __future__ import annotations

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode


async def generations(client: Client, workflow_id: str, current: str) -> list[str]:
    """Every execution of a run, newest first, walked back from ``current`` through each one's start
    (``continued_execution_run_id``).

    The walk stops at an execution Temporal no longer has (an earlier deletion removed it).

    Args:
        client: The Temporal client.
        workflow_id: The run's id.
        current: The execution to start from (the run's current one).

    Returns:
        The executions' run ids, ``current`` first.
    """
    found: list[str] = []
    execution: str | None = current
    while execution and execution not in found:
        handle = client.get_workflow_handle(workflow_id, run_id=execution)
        previous: str | None = None
        try:
            async for event in handle.fetch_history_events(page_size=1):
                previous = event.workflow_execution_started_event_attributes.continued_execution_run_id or None
                break
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            break
        found.append(execution)
        execution = previous
    return found
