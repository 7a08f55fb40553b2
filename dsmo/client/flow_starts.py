"""Starting a run of a definition with concurrency keys: claim its slots first, act on a busy key.

Before the run starts, the starter asks each key's lock (in the order the run takes them) for a
slot on the run's behalf, in one atomic step that creates the lock if needed (Temporal's
update-with-start). A free slot is the run's from its start: it starts `running` and asks for
nothing. At the first busy key the run is put in line there and then (so runs are served in
the order they were started), and that key's ``onBusy`` decides:

- ``queue``: the run starts `pending`, waits for that slot and takes the next keys itself;
- ``reject``: nothing starts; the caller is told which run holds the key (`KeyBusy`);
- ``cancel-previous``: the runs holding the key and those in line for it are cancelled, with
  the reason recorded and their sagas undone, and the run queues for the slot they give back;
- ``deliver``: the start's events go to the run holding the key instead (its wait in progress
  takes them, or its inbox keeps them for the next wait that does), and no run starts. If that
  run takes none of them (no wait of its takes them, or it ended meanwhile), the start goes
  ahead as a new run in line: the events are taken by the active run or start a new one, never
  both and never neither.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsmo.activities.artifacts import ArtifactStore
from dsmo.client import run_requests
from dsmo.client.client_errors import (
    EventNotAccepted,
    InvalidInputDocument,
    KeyBusy,
    RunClosed,
    RunNotFound,
)
from dsmo.client.core import ClientCore
from dsmo.client.with_start import update_with_start
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.run_records import ExecutionRequest
from dsmo.workflows.contracts.slot_io import delivery_key
from dsmo.workflows.contracts.subject_io import SubjectSeal
from dsmo.workflows.definition.flow_control import FlowControlError, KeySlot, release_of, shard_of, slots_of
from dsmo.workflows.definition.sensitive import key_digest
from dsmo.workflows.events.resume_events import EventAck
from dsmo.workflows.flow.key_lines import KeyClaimAnswer
from dsmo.workflows.flow.key_locks import KeyLocks, KeyLocksState

# How long a cancel-previous start looks for a holder whose own start has not created it yet.
HOLDER_LOOKS, HOLDER_PAUSE_SECONDS = 20, 0.25


@dataclass
class Admission:
    """What flow control did with one start.

    Attributes:
        claimed: Locks whose slot the run holds from its start.
        in_line: The lock the run was put in line at (its place kept for it until it asks).
        queued_behind: The key the run waits in line for (``conversation.id=c-42``), if any.
        ahead: How many runs held that key or waited ahead of it (by priority) when it was asked.
        cancelled: Runs cancelled to make room (``onBusy: cancel-previous``).
        delivered_to: The run that took the start's events instead (``onBusy: deliver``).
        acks: What that run answered to each event.
    """

    claimed: list[str] = field(default_factory=list)
    in_line: str | None = None
    queued_behind: str | None = None
    ahead: int = 0
    cancelled: list[str] = field(default_factory=list)
    delivered_to: str | None = None
    acks: list[EventAck] = field(default_factory=list)


@dataclass(frozen=True)
class StartReport:
    """What became of a start: the run, and what flow control did with it.

    Attributes:
        run_id: The run; with ``delivered``, the active run that took the start's events.
        status: ``running`` (it runs at once), ``pending`` (delayed, or in line for a slot),
            ``delivered`` (no run started: the active run of the key took the events) or
            ``debounced`` (the start joined its key's batch: the run starts once the key is quiet).
        queued_behind: The concurrency key the run waits in line for (``conversation.id=c-42``).
        ahead: How many runs held that key or waited ahead of it (by priority) when the run asked.
        cancelled: Runs cancelled to make room for it (``onBusy: cancel-previous``).
        acks: With ``delivered``: what the active run answered to each event.
        gathered: With ``debounced``: how many starts the run's batch has gathered so far.
        debouncer: With ``debounced``: the workflow id of the key's debouncer, which starts the run.
    """

    run_id: str
    status: str
    queued_behind: str | None = None
    ahead: int = 0
    cancelled: list[str] = field(default_factory=list)
    acks: list[EventAck] = field(default_factory=list)
    gathered: int = 0
    debouncer: str | None = None


def key_slots(request: ExecutionRequest) -> list[KeySlot]:
    """The slots a new run of ``request`` needs (none for a replay or a continued run).

    Raises:
        InvalidInputDocument: The input lacks a value a key reads (the field is named).
    """
    definition = request.definition
    if not definition.concurrency or request.replay is not None or request.checkpoint is not None:
        return []
    try:
        return slots_of(definition.agent, definition.concurrency, request.input, request.key_locks_queue)
    except FlowControlError as err:
        raise InvalidInputDocument(f"input: {err}") from None


async def admit(
    core: ClientCore,
    slots: list[KeySlot],
    run_id: str,
    task_queue: str,
    request: ExecutionRequest,
    events: Sequence[Mapping[str, Any]] = (),
    store: ArtifactStore | None = None,
) -> Admission:
    """Claim the run's slots in order until one is busy; act on that key's ``onBusy``.

    Raises:
        KeyBusy: A busy key says ``reject``, or its line is full (slots claimed so far are given back).
    """
    admission, priority = Admission(), request.priority
    for slot in slots:
        delivering = slot.on_busy == "deliver" and bool(events)
        # In line at once unless the key rejects or delivers: runs are served in the order they started.
        lining_up = slot.on_busy != "reject" and not delivering
        answer = await _claim(core, slot, run_id, task_queue, queue=lining_up, priority=priority)
        if not answer.admitted and delivering:
            for holder in answer.holders:
                assert store is not None, "a key that delivers needs the store, to keep the start"
                start = _delivered_start(request, events, task_queue)
                seal = request.subject.seal if request.subject else None
                if seal is None and request.definition.subject is not None:
                    raise DsmoError("subject: its keys cannot be read now, so the start cannot be held; try again")
                acks = await _deliver(store, core, holder, events, start, seal)
                if acks is not None:
                    await give_back(core, slots, admission.claimed, run_id, task_queue)
                    return Admission(delivered_to=holder, acks=acks)
            # No active run took them (none waits for them, or it ended): a new run, in line.
            answer = await _claim(core, slot, run_id, task_queue, queue=True, priority=priority)
        if answer.admitted:
            admission.claimed.append(slot.lock)
            continue
        admission.queued_behind, admission.ahead = slot.label, len(answer.holders) + answer.waiting
        admission.in_line = slot.lock
        if slot.on_busy == "reject" or answer.refused is not None:  # refused: its line is at its limit
            admission.in_line = None
            await give_back(core, slots, admission.claimed, run_id, task_queue)
            holders = ", ".join(answer.holders) or "runs in line"
            why = f": {answer.refused}" if answer.refused else f" is busy: run {holders} holds it (onBusy: reject)"
            raise KeyBusy(f"concurrency.{slot.index}: {slot.label}{why}", active_runs=answer.holders)
        if slot.on_busy == "cancel-previous":
            # The key's name, not its value: the reason goes into the cancelled run's trail, which
            # erasing a data subject does not reach, and a key's value may name a person.
            key_name = slot.label.removesuffix(f"={slot.key}")
            reason = f"replaced by run {run_id} for {key_name} (onBusy: cancel-previous)"
            # Every run started before it for the key: those holding it, and those in line for it
            # (else they would run, one after another, before the run that replaced them).
            replaced = [*answer.holders, *answer.queued]
            await asyncio.gather(*(_cancel(core, previous, reason) for previous in replaced))
            admission.cancelled = replaced
        break  # the run takes this key and the next ones in line itself, in order
    return admission


def _delivered_start(request: ExecutionRequest, events: Sequence[Mapping[str, Any]], task_queue: str) -> dict[str, Any]:
    """What a run that ends without taking a delivered event needs to start the run it stood for."""
    return {
        "workflowVersion": request.definition.workflow_version,
        "input": request.input,
        "events": [dict(event) for event in events],
        "taskQueue": task_queue,
    }


async def _deliver(
    store: ArtifactStore,
    core: ClientCore,
    holder: str,
    events: Sequence[Mapping[str, Any]],
    start: dict[str, Any],
    seal: SubjectSeal | None,
) -> list[EventAck] | None:
    """Hand the start's events to ``holder``; None when it takes none of them (the start goes ahead).

    The first event decides: once it is taken, the others follow it to the same run. The start
    is kept in the store first: if the run ends before it takes an event, the event goes on to a
    run of its own (`activities/hand_on.py`).
    """
    for event in events:
        # Sealed with the start's data subject, as its run's input would be.
        key = delivery_key(holder, str(event["event_id"]))
        await asyncio.to_thread(functools.partial(store.put_json_once, key, start, seal=seal))
    acks = []
    for index, event in enumerate(events):
        try:
            ack = await run_requests.deliver_event(
                core, holder, event["type"], event["data"], event_id=event["event_id"]
            )
        except (EventNotAccepted, RunClosed, RunNotFound):
            if index == 0:
                return None
            raise
        if index == 0 and not (ack.accepted or ack.duplicate):
            return None
        acks.append(ack)
    return acks


async def give_back(core: ClientCore, slots: list[KeySlot], locks: list[str], run_id: str, task_queue: str) -> None:
    """Give back slots claimed for a run that did not start."""
    for slot in slots:
        if slot.lock in locks:
            shard, release = release_of(slot.lock, run_id)
            await core.temporal.start_workflow(
                KeyLocks.run,
                KeyLocksState(owner=slot.owner),
                id=shard,
                task_queue=task_queue,
                start_signal="release",
                start_signal_args=[release],
            )


async def _claim(
    core: ClientCore, slot: KeySlot, run_id: str, task_queue: str, *, queue: bool, priority: int | None
) -> KeyClaimAnswer:
    shard, line = shard_of(slot.lock)
    ask = {
        "run_id": run_id,
        "line": line,
        "queue": queue,
        # cancel-previous replaces the runs in line too: it goes first, and the answer names them.
        "replaces": slot.on_busy == "cancel-previous",
        "priority": priority,
        "max_concurrent": slot.limit,
        "key": key_digest(slot.key),  # the lock keeps only the value's digest
        # Used only until a run tells the lock the worker's own setting (which then governs).
        "check_every_seconds": core.settings.worker.slot_holder_check_seconds,
    }
    answer = KeyClaimAnswer(admitted=False, verify=True)
    for update in ("claim", "claim_verified"):  # the second only when holders may have ended
        if not answer.verify:
            break
        answer = await update_with_start(
            core.temporal,
            core.update_gates,
            "DsmoKeyLocks",
            KeyLocksState(owner=slot.owner),
            shard,
            task_queue,
            update,
            ask,
            KeyClaimAnswer,
            what=f"concurrency.{slot.index} ({slot.label})",
            long_lived=True,
        )
    return answer


async def _cancel(core: ClientCore, run_id: str, reason: str) -> None:
    # A holder another start claimed the slot for a moment ago may not exist yet: it is cancelled
    # once it does. One whose starter died never does; its lock's holder check frees the slot.
    for _ in range(HOLDER_LOOKS):
        try:
            await run_requests.cancel(core, run_id, reason=reason, by="dsmo (onBusy: cancel-previous)")
            return
        except RunClosed:
            return  # it ended meanwhile: its slot is given back all the same
        except RunNotFound:
            await asyncio.sleep(HOLDER_PAUSE_SECONDS)
