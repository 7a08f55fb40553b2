"""Telling runs they got their slot, and freeing the slots of holders that ended around DSMO.

Shared by the workflows that keep lines (`engine/rate_limiter.py`, `engine/key_locks.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from dsmo.workflows.contracts.slot_io import CHECK_HOLDERS, HolderCheck, HolderStates
    from dsmo.workflows.flow.slot_line import SlotLine

# A holder claimed by a starter may not have started yet: it is not counted as gone before this.
CLAIM_GRACE = timedelta(seconds=30)
# A key lock's check of its holders gives up after this (it checks again at its next deadline).
CHECK_BUDGET = timedelta(minutes=2)
CHECK_RETRIES = RetryPolicy(maximum_attempts=3)


async def signal_grant(line: SlotLine, run_id: str, grant: dict[str, Any], *, restamp: bool) -> bool:
    """Signal ``SLOT_GRANTED`` to ``run_id``; a run that ended meanwhile gives its slot back.

    Args:
        line: The line ``run_id`` now holds a slot of.
        run_id: The new holder.
        grant: The signal's payload.
        restamp: Note when the holder got its slot (a key's line; an agent's rate limit does not).

    Returns:
        Whether ``run_id`` still holds the slot (if not, the next in line may take it).
    """
    joined = line.since.get(run_id)
    if restamp:
        line.since[run_id] = workflow.now()
    try:
        await workflow.get_external_workflow_handle(run_id).signal("SLOT_GRANTED", grant)
    except Exception:  # noqa: BLE001 - a run that ended meanwhile gives its slot back
        if joined is not None and workflow.now() - joined < CLAIM_GRACE:
            # Put in line by a starter an instant ago: the run has not started yet. It asks
            # for its slot when it does, and is granted it again then.
            return True
        line.drop(run_id)
        return False
    return True


async def drop_gone_holders(lines: Sequence[SlotLine], *, bounded: bool = False) -> bool:
    """Ask Temporal about the holders of ``lines`` and free the slots of those that ended.

    Returns:
        Whether a slot was freed.
    """
    found = await holder_states([run_id for line in lines for run_id in line.holders], bounded=bounded)
    settled = workflow.now() - CLAIM_GRACE
    freed = False
    for line in lines:
        # A holder not found may be one a starter claimed a slot for and is starting now.
        missing = [run for run in found.missing if run in line.holders and line.since.get(run, settled) <= settled]
        gone = [*(run for run in found.ended if run in line.holders), *missing]
        for run_id in gone:
            # A key lock's runs end without a word when nobody waits: finding them gone is routine there.
            log = workflow.logger.debug if bounded else workflow.logger.warning
            log("Slot of %s given back: the run ended without giving it back", run_id)
            line.drop(run_id)
        freed = freed or bool(gone)
    return freed


async def holder_states(holders: list[str], *, bounded: bool = False) -> HolderStates:
    """Which of ``holders`` have ended, and which Temporal does not know (an activity).

    ``bounded``: give up after a few tries (a key lock checks again later) rather than retry for ever.
    """
    found: HolderStates = await workflow.execute_activity(
        CHECK_HOLDERS,
        HolderCheck(runs=holders),
        result_type=HolderStates,
        start_to_close_timeout=timedelta(seconds=30),
        schedule_to_close_timeout=CHECK_BUDGET if bounded else None,
        retry_policy=CHECK_RETRIES if bounded else None,
    )
    return found
