"""A run's slots under its definition's concurrency keys: taken before it runs, given back when it ends.

Each key value has its own lock (`engine/rate_limiter.py`). A run takes its slots one key at a
time in the locks' order, so two runs that share two keys can never each hold one and wait for
the other. A starter may have claimed some already (`ExecutionRequest.slots_claimed`): those
are held from the start, with nothing asked. Until every slot is held the run is PENDING, and
its pending reason names the key it waits for.

A key with ``holdWhileWaiting: false`` is given back while the run waits, and taken again,
in line, when the wait ends. Replays and forks re-executing a record take no slots.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from temporalio import workflow

from dsmo.workflows.common import patches
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.run_records import AuditType
from dsmo.workflows.contracts.slot_io import HandedOn, HandOn, SlotRequest
from dsmo.workflows.definition.flow_control import (
    QUIET_LIMIT,
    FlowControlError,
    KeySlot,
    release_of,
    shard_of,
    slots_of,
)
from dsmo.workflows.definition.sensitive import key_digest, masked_key_label
from dsmo.workflows.events.inbox import InboxEntry
from dsmo.workflows.run.activity_calls import ActivityFailed
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import RunEnded, ServiceFailed
from dsmo.workflows.run.service_budgets import BUDGETS, call_service, record_service_failure

# workflow.patched id: a run gives its key slots back by signalling the lock (at its end, only
# those a run waits for), and leaves the line it waits in when it ends.
SIGNALLED_RELEASE_PATCH = "signalled-slot-release"
# workflow.patched id: the run's keys live in sharded key locks (`engine/key_locks.py`).
SHARDED_KEYS_PATCH = "sharded-key-locks"


def key_slots(run: Run) -> list[KeySlot]:
    """The slots this run needs, in the order it takes them (none for a replay).

    Raises:
        RunEnded: The run's input lacks a value a key reads (a start around DSMO's checks).
    """
    if not run.definition.concurrency or run.replay is not None:
        return []
    if run.sharded_keys is None:
        # Runs from before sharded key locks keep the lock per key value they were started with.
        run.sharded_keys = patches.patched(SHARDED_KEYS_PATCH)
    try:
        return slots_of(
            run.definition.agent,
            run.definition.concurrency,
            run.request.input,
            run.request.key_locks_queue,
            sharded=run.sharded_keys,
        )
    except FlowControlError as err:
        raise RunEnded(RunStatus.FAILED, "", str(err)) from None


async def take_all(run: Run) -> None:
    """Hold every slot the run needs, waiting in line for each; PENDING meanwhile."""
    claimed, slots = set(run.request.slots_claimed), key_slots(run)
    # Claimed by a starter from before sharded key locks: given back, and taken here in a shard.
    stray = sorted(claimed - {slot.lock for slot in slots}) if run.sharded_keys else []
    if stray:
        await _give_back(run, [_bare(run, lock) for lock in stray])
    for slot in slots:
        if slot.lock in claimed:
            run.slots_held.append(slot.lock)
            _record(run, "SLOT_TAKEN", slot)
        else:
            await _take(run, slot)


async def give_back_while_waiting(run: Run) -> None:
    """The run began to wait: give back the slots of keys that do not hold while waiting."""
    leaving = [slot for slot in key_slots(run) if not slot.hold_while_waiting and slot.lock in run.slots_held]
    for slot in leaving:
        _record(run, "SLOT_GIVEN_BACK", slot)
    if leaving:
        await _give_back(run, leaving)


async def take_back_after_waiting(run: Run) -> None:
    """The wait ended: take the slots given back when it began again, in line."""
    for slot in key_slots(run):
        if slot.lock not in run.slots_held:
            await _take(run, slot)


async def give_back_all(run: Run) -> None:
    """The run ended: every slot it holds goes to the next in line, and it leaves any line it is in.

    By the locks it holds, not by its definition's keys: a run moved to a version with other keys
    still holds the slots it took under the old ones.
    """
    try:
        known = {slot.lock: slot for slot in key_slots(run)}
    except RunEnded:
        known = {}
    held = list(dict.fromkeys([*run.slots_held, *([run.slot_asked] if run.slot_asked else [])]))
    if patches.patched(SIGNALLED_RELEASE_PATCH):
        run.left_quietly = [lock for lock in held if _left_quietly(run, known.get(lock), lock)]
        held = [lock for lock in held if lock not in run.left_quietly]
    leaving = [known.get(lock) or _bare(run, lock) for lock in held]
    if leaving:
        await _give_back(run, leaving)


async def give_back_late(run: Run) -> bool:
    """Give back the slots the ending run left without a word that a run was since told to wait
    for (its lock marked them told, and will not ask again).

    Returns:
        Whether it gave any back (then more may come while it did).
    """
    late = [lock for lock in run.left_quietly if lock in run.slots_wanted]
    if not late:
        return False
    run.left_quietly = [lock for lock in run.left_quietly if lock not in late]
    await asyncio.gather(*(_release(run, lock) for lock in late))
    return True


def _left_quietly(run: Run, slot: KeySlot | None, lock: str) -> bool:
    """A slot the run leaves without a word as it ends: its key lock learns for itself that the
    holder ended when another run needs the slot (`engine/key_locks.py`).

    Not a slot a run waits for (`SLOT_WANTED`), nor the line this run waits in, nor a lock of a
    key value of its own (from before sharding: it does not ask), nor a key whose limit is
    above `QUIET_LIMIT` (its line would carry many holders that ended until its next check).
    """
    return (
        slot is not None
        and shard_of(lock)[1] is not None
        and slot.limit <= QUIET_LIMIT
        and lock not in run.slots_wanted
        and lock != run.slot_asked
    )


def _bare(run: Run, lock: str) -> KeySlot:
    """A held lock whose key the run's definition no longer names: enough to give its slot back."""
    agent = run.definition.agent
    return KeySlot(
        lock=lock, owner=agent, key="", label=lock, limit=1, hold_while_waiting=True, on_busy="queue", index=0
    )


async def _take(run: Run, slot: KeySlot) -> None:
    state = run.state
    if state.status is RunStatus.PENDING:
        state.pending_reason = f"queued: {slot.label} allows {slot.limit} run(s) at once"
    run.slot_asked = slot.lock
    await _call(run, contracts.REQUEST_SLOT, slot)
    await workflow.wait_condition(lambda: slot.lock in run.slots_granted or slot.lock in run.slots_refused)
    refused = run.slots_refused.pop(slot.lock, None)
    if refused is not None and slot.lock not in run.slots_granted:
        # Its lock's shard had no room to line it up (`engine/key_lines.py`): it never waited, and ends.
        run.slot_asked = None
        if state.status is RunStatus.PENDING:
            state.enter(RunStatus.RUNNING)
        data = _record(run, "SLOT_REFUSED", slot, reason=refused)
        raise RunEnded(RunStatus.FAILED, "", f"flow control: the line of {data['key']} is full: {refused}")
    run.slots_granted.discard(slot.lock)
    run.slots_held.append(slot.lock)
    run.slot_asked = None
    _record(run, "SLOT_TAKEN", slot)


async def hand_on_deliveries(run: Run, leaving: Sequence[InboxEntry] | None = None) -> dict[str, str]:
    """Kept events leave the run untaken (``leaving``; default: all, as it ends): those a start of its
    key delivered to it (``onBusy: deliver``) each start a new run, as their start would have.

    Returns:
        The new runs, by event id.
    """
    definition, state = run.definition, run.state
    entries = list(state.inbox if leaving is None else leaving)
    delivering = any(entry.on_busy == "deliver" for entry in definition.concurrency or ())
    if not delivering or not entries or run.replay is not None:
        return {}
    ask = HandOn(run_id=state.run_id, event_ids=[entry.event.event_id for entry in entries])
    try:
        handed: HandedOn = await call_service(contracts.HAND_ON, ask, result_type=HandedOn)
    except ActivityFailed as failed:
        reason = record_service_failure(state, BUDGETS[contracts.HAND_ON], failed.error, stage=None)
        workflow.logger.warning("Handing on the delivered events of %s failed: %s", state.run_id, reason)
        return {}
    return handed.runs


def _record(run: Run, event: AuditType, slot: KeySlot, **extra: str) -> dict[str, Any]:
    # When a run took a key's slot and when it gave it back to wait: the trail shows who held a
    # key when (a run's end gives its slots back right after RUN_COMPLETED or RUN_ABORTED).
    # A run about a data subject names the key's value by its keyed fingerprint: the trail outlives an erasure.
    data = {"key": masked_key_label(slot.label, slot.key, run.fingerprint_key), "limit": slot.limit, **extra}
    run.state.audit.record(event, at=workflow.now(), stage=run.state.current_node, data=data)
    return data


async def _give_back(run: Run, slots: list[KeySlot]) -> None:
    for slot in slots:
        if slot.lock in run.slots_held:
            run.slots_held.remove(slot.lock)
    run.slot_asked = None
    # Runs from before signalled releases gave slots back through an activity; they replay so.
    if patches.patched(SIGNALLED_RELEASE_PATCH):
        await asyncio.gather(*(_release(run, slot.lock) for slot in slots))
    else:
        await asyncio.gather(*(_call(run, contracts.RELEASE_SLOT, slot) for slot in slots))


async def _release(run: Run, lock: str) -> None:
    """Signal the lock from the run itself: Temporal sends the signal only once the workflow task
    that gave the slot back is committed, so the next run in line never starts before this one
    has, in its own history, ended or begun to wait (a local activity could signal from a
    workflow task that a crash then undoes). The lock runs while one of its slots is held or
    waited for; one ended around DSMO keeps nothing to give back."""
    shard, release = release_of(lock, run.state.run_id)
    try:
        await workflow.get_external_workflow_handle(shard).signal("release", release)
    except Exception as err:  # noqa: BLE001 - the lock is gone: nothing of this run's is left in it
        workflow.logger.warning("Giving back %s's slot found no lock %s: %s", run.state.run_id, shard, err)


async def _call(run: Run, activity: str, slot: KeySlot) -> None:
    state = run.state
    request = SlotRequest(
        agent=slot.owner,
        run_id=state.run_id,
        max_concurrent=slot.limit,
        lock=slot.lock,
        # Its digest only: the lock keeps it in its history, which erasing a run's subject does not delete.
        key=key_digest(slot.key) if slot.key else None,
        priority=run.request.priority,
    )
    asking = activity == contracts.REQUEST_SLOT
    try:
        await call_service(activity, request, result_type=type(None), cancellation_is_failure=not asking)
    except ActivityFailed as failed:
        reason = record_service_failure(state, BUDGETS[activity], failed.error, stage=None)
        workflow.logger.warning("%s failed for %s: %s", activity, state.run_id, reason)
        if asking:
            raise ServiceFailed(activity, reason) from None
