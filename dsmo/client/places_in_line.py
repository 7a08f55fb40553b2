"""A run waiting in line for a concurrency key's slot: the key's line as its lock keeps it, and
the run's place in it (what `status` adds to a pending run's reason)."""

from __future__ import annotations

from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from dsmo.workflows.contracts.run_records import StatusView
from dsmo.workflows.definition.flow_control import shard_of
from dsmo.workflows.flow.key_lines import KeyLine
from dsmo.workflows.flow.rate_limiter import LimiterState
from dsmo.workflows.flow.slot_line import SlotLine


async def key_line(temporal: Client, lock: str) -> SlotLine | None:
    """A key value's line as its lock keeps it now (None: nobody holds or waits for the key).

    Args:
        temporal: A connected Temporal client.
        lock: The key value's lock id (`lock_id`).

    Returns:
        Who holds the key and who waits, in order; None once the lock has ended.

    Raises:
        RPCError: Temporal did not answer.
        WorkflowQueryFailedError: The lock could not answer (busy, or ending).
    """
    shard, line = shard_of(lock)
    handle = temporal.get_workflow_handle(shard)
    try:
        found: SlotLine | None
        if line is None:  # a key value's own lock, from before key locks were sharded
            found = await handle.query("snapshot", result_type=LimiterState)
        else:
            found = await handle.query("line", line, result_type=KeyLine)
        return found
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None  # the lock ended: its last line emptied a while ago
        raise


async def with_place_in_line(temporal: Client, view: StatusView) -> StatusView:
    """A run in line for a key's slot: its place in the line, added to its pending reason."""
    assert view.queued_for is not None
    try:
        line = await key_line(temporal, view.queued_for)
    except (RPCError, WorkflowQueryFailedError):
        return view  # the lock is busy or just ended: the reason stands without the place
    if line is None or view.run_id not in line.queue:
        return view
    place = f"{line.queue.index(view.run_id) + 1} of {len(line.queue)} in line"
    return view.model_copy(update={"pending_reason": f"{view.pending_reason}; {place}"})
