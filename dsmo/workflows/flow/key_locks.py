"""KeyLocks: the lines of a scope's concurrency key values, spread by hash over a fixed set of shards.

A definition's concurrency key (`definition/flow_control.py`) gives every key value a line of
its own: who holds its slots, who waits, first come first served (`flow/slot_line.py`). The
lines of one scope (an agent, or a group) live in `KEY_SHARDS` long-lived workflows, a key value
always in the same one (``dsmo-keys.{scope}.{task queue}.{shard}``): a key value costs no workflow,
one workflow task serves all the claims and releases that arrived together, none serves everyone.

Runs ask for a slot with `acquire` (sent with signal-with-start by an activity); the shard
signals `SLOT_GRANTED` to each run it admits, and `SLOT_REFUSED` to one its lines have no room
for (`key_lines.SHARD_CEILING`): that run ends FAILED, saying so. A starter may `claim` a free
slot for a run before starting it (an update: admitted at once, or told who holds the key).

A run gives its slot back (`release`) only when it was told that a run waits for it
(`SLOT_WANTED`), or when it begins a wait under a key that does not hold while waiting: a run
nobody waits for ends without a word, which saves it and the shard a workflow task each. The
shard learns that a holder ended when it needs the slot: a claim or a run in line finds the key
full, and the shard tells the holders a run waits; a holder that ended cannot take that signal,
and its slot is freed (Temporal refuses the signal only once the holder's end is committed). Every
``check_every_seconds`` the shard also asks Temporal about the holders of its lines (at most 200
a time), which forgets lines whose holders ended unasked and frees slots of holders terminated
or reset around DSMO, however busy its other keys keep it. The shard carries only lines in use
across continue-as-new, and ends a minute after its last line emptied.

Longer than most modules: the shard is one workflow class, its handlers and its housekeeping.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

from dsmo.workflows.common import patches

with workflow.unsafe.imports_passed_through():
    from pydantic import Field

    from dsmo.workflows.common.wire import WireModel
    from dsmo.workflows.flow import key_lines
    from dsmo.workflows.flow.key_lines import KeyClaimAnswer, KeyLine, line_refusal, tell_waiting
    from dsmo.workflows.flow.long_lived import hand_over_when_long
    from dsmo.workflows.flow.slot_grants import drop_gone_holders, signal_grant

IDLE_GRACE = timedelta(minutes=1)
CHECK_BATCH = 200  # holders one check asks Temporal about; lines beyond wait for the next check


class KeyLocksState(WireModel):
    """A shard's state, carried across continue-as-new: only lines someone holds or waits in.

    Attributes:
        owner: The scope: the agent, or ``group-<name>``.
        lines: The lines by key digest.
        check_every_seconds: How often the holders are checked (None: never).
        worker_checks: It is the worker's setting (a run's `acquire` sent it): a starter's no longer counts.
        next_check: When they are next checked: carried, so continuing as new never puts it off.
    """

    owner: str
    lines: dict[str, KeyLine] = Field(default_factory=dict)
    check_every_seconds: float | None = None
    worker_checks: bool = False
    next_check: datetime | None = None


@workflow.defn(name="DsmoKeyLocks")
class KeyLocks:
    """One shard of a scope's key locks on one task queue (see the module's docstring)."""

    @workflow.init
    def __init__(self, state: KeyLocksState) -> None:
        self._state = state
        self._due: set[str] = set(state.lines)  # lines that changed: a slot to hand on, or idle now
        self._regrants: list[tuple[str, str]] = []  # (line, holder) that asked again
        self._refusals: list[tuple[str, str, str]] = []  # (line, run, why) that found the shard full
        # Lines with holders, least recently checked first: their holders are checked, for those that ended.
        self._held: dict[str, None] = {name: None for name, line in state.lines.items() if _checked(line)}
        self._next_check: datetime | None = state.next_check
        self._checking: asyncio.Task[None] | None = None
        self._idle_since: datetime | None = None
        self._rang = False  # the clock reached a deadline: a check, or the end of an idle shard

    @workflow.run
    async def run(self, state: KeyLocksState) -> None:
        # One timer at a time, for the nearest deadline, instead of one per wake-up: a busy
        # shard wakes for every claim and release.
        clock = asyncio.create_task(self._clock())
        while True:
            self._settle(await self._grant())
            if self._rang:
                self._rang = False
                now = workflow.now()
                if self._next_check is not None and now >= self._next_check and self._checking is None:
                    # Beside the loop: a slow check holds up no claim, release or grant.
                    self._checking = asyncio.create_task(self._check_holders())
                if self._idle_since is not None and now - self._idle_since >= IDLE_GRACE:
                    clock.cancel()
                    return
            await hand_over_when_long(self._state, ready=self._ready_to_hand_over)
            await workflow.wait_condition(lambda: bool(self._due or self._regrants or self._rang))

    @workflow.signal
    def acquire(self, request: dict[str, Any]) -> None:
        run_id, name = str(request.get("run_id", "")), str(request.get("line", ""))
        line = self._line(name, request, from_worker=True)
        if run_id in line.holders:
            self._regrants.append((name, run_id))  # a run reset to before it got its slot asks again
        elif run_id and run_id not in line.queue:
            if (refused := key_lines.ceiling_refusal(self._state.lines, run_id)) is None:
                line.line_up(run_id, request.get("priority"))
            else:  # beyond it the shard could not continue as new: the run is told, and ends
                self._refusals.append((name, run_id, refused))
        self._due.add(name)

    @workflow.signal
    def release(self, request: dict[str, Any]) -> None:
        name = str(request.get("line", ""))
        line = self._state.lines.get(name)
        if line is not None:
            line.drop(str(request.get("run_id", "")))
            self._due.add(name)

    @workflow.update
    def claim(self, request: dict[str, Any]) -> KeyClaimAnswer:
        """Give ``run_id`` a slot of the key now if one is free and nobody waits; else say who holds
        it, and (with ``queue``) put the run in line, so runs are served in the order they started.

        Runs that end with nobody waiting for their slot do not give it back (it costs them
        nothing that way): when the key is full with holders not yet told that a run waits, some
        of them may have ended, and the answer says ``verify``: ask `claim_verified`."""
        name, run_id = str(request["line"]), str(request["run_id"])
        line = self._line(name, request)
        if run_id not in line.holders and line.full and line.unwanted():
            return KeyClaimAnswer(admitted=False, holders=list(line.holders), waiting=len(line.queue), verify=True)
        return self._claim(name, line, run_id, request)

    @workflow.update
    async def claim_verified(self, request: dict[str, Any]) -> KeyClaimAnswer:
        """`claim`, after telling the key's holders that a run waits: those that ended cannot take
        the signal, and their slots are free. (Apart from `claim` because a handler that waits
        keeps its update in flight across workflow tasks, and most claims need not wait.)"""
        name, run_id = str(request["line"]), str(request["run_id"])
        line = self._line(name, request)
        if run_id not in line.holders and line.full and line.unwanted():
            await self._tell_waiting(name, line, may_ask=True)
            line = self._line(name, request)  # the line may have emptied and been forgotten meanwhile
        return self._claim(name, line, run_id, request)

    def _claim(self, name: str, line: KeyLine, run_id: str, request: dict[str, Any]) -> KeyClaimAnswer:
        lining_up = request.get("queue") and run_id not in line.holders and run_id not in line.queue
        refused = line_refusal(self._state.lines, line, run_id) if lining_up and (line.full or line.queue) else None
        if refused is not None:
            return KeyClaimAnswer(admitted=False, holders=list(line.holders), waiting=len(line.queue), refused=refused)
        if request.get("replaces") and not patches.patched(key_lines.REPLACES_PATCH):
            request = {**request, "replaces": False}  # handled, as recorded, by a lock from before
        answer, changed = line.claim(run_id, request, workflow.now())
        if changed:
            self._due.add(name)
        return KeyClaimAnswer(**answer.model_dump())

    @workflow.query
    def line(self, name: str) -> KeyLine | None:
        """One key value's line, by its digest."""
        return self._state.lines.get(name)

    @workflow.query
    def snapshot(self) -> KeyLocksState:
        return self._state

    def _line(self, name: str, request: dict[str, Any], *, from_worker: bool = False) -> KeyLine:
        line = self._state.lines.get(name)
        if line is None:
            # KeyLine keeps only the key's digest, whatever an older starter or worker sends.
            line = self._state.lines[name] = KeyLine(key=str(request.get("key") or ""))
        limit = max(1, int(request.get("max_concurrent", line.max_concurrent)))
        if limit > line.max_concurrent:
            self._due.add(name)  # a definition's higher limit frees slots for the line at once
        line.max_concurrent = limit
        # The worker's setting (sent with a run's `acquire`) governs; a starter's stands in until then.
        every = request.get("check_every_seconds")
        if every is not None and (from_worker or not self._state.worker_checks):
            self._state.check_every_seconds = float(every)
            self._state.worker_checks = self._state.worker_checks or from_worker
        return line

    async def _grant(self) -> set[str]:
        """Hand free slots on to the first in line of the lines that changed; those lines."""
        owner, shard = self._state.owner, workflow.info().workflow_id
        regrants, self._regrants = self._regrants, []
        signals = [(name, run) for name, run in regrants if run in getattr(self._state.lines.get(name), "holders", ())]
        refusals, self._refusals = self._refusals, []
        if refusals and patches.patched(key_lines.REFUSAL_PATCH):
            await asyncio.gather(*(key_lines.refuse(run, f"{shard}/{name}", why) for name, run, why in refusals))
        due, self._due = self._due, set()
        for name in sorted(due):  # sorted: the same signals in the same order on replay
            line = self._state.lines.get(name)
            while line is not None and (holder := line.next_holder()) is not None:
                signals.append((name, holder))
        # One workflow task sends them all: a shard's grants do not wait for each other.
        kept = await asyncio.gather(
            *(
                signal_grant(self._state.lines[name], run_id, {"agent": owner, "lock": f"{shard}/{name}"}, restamp=True)
                for name, run_id in signals
            )
        )
        # A run that ended before its grant freed the slot again: the next in line may take it.
        self._due.update(name for (name, _), still in zip(signals, kept, strict=True) if not still)
        # Holders runs wait behind give their slot back when they end; those that ended already are dropped.
        waiting = [name for name in sorted(due) if (line := self._state.lines.get(name)) and line.queue]
        await asyncio.gather(*(self._tell_waiting(name, self._state.lines[name], may_ask=False) for name in waiting))
        return due | {name for name, _ in signals}

    async def _tell_waiting(self, name: str, line: KeyLine, *, may_ask: bool) -> None:
        """Tell the line's holders a run waits: one that ended frees its slot (the line is due),
        and one the main loop cannot tell from a run not started yet is checked at once, beside it."""
        lock = f"{workflow.info().workflow_id}/{name}"
        told = await asyncio.gather(
            *(tell_waiting(line, holder, {"lock": lock}, may_ask=may_ask) for holder in line.unwanted())
        )
        if "gone" in told:
            self._due.add(name)
        if "unsure" in told:
            self._next_check = workflow.now()

    def _settle(self, changed: set[str]) -> None:
        """Forget lines that emptied, note those where runs wait behind holders, set the deadlines.

        Only the lines that changed are looked at: one pass's work does not grow with the shard.
        """
        lines, now = self._state.lines, workflow.now()
        for name in sorted(changed):
            line = lines.get(name)
            if line is not None and line.idle:
                del lines[name]
            if line is not None and _checked(line):
                self._held.setdefault(name, None)
            else:
                self._held.pop(name, None)
        every = self._state.check_every_seconds
        if not self._held or not every:
            self._next_check = None
        elif self._next_check is None:
            self._next_check = now + timedelta(seconds=every)
        self._idle_since = None if lines else (self._idle_since or now)

    def _ready_to_hand_over(self) -> bool:
        """Carry the holders' check over; a refused run is told first (the next run would not know it)."""
        self._state.next_check = self._next_check
        return not self._refusals

    def _deadline(self) -> datetime | None:
        """When the clock next rings: the holders' check (not while one runs), or the end of an idle shard."""
        ends = self._idle_since + IDLE_GRACE if self._idle_since is not None else None
        check = self._next_check if self._checking is None else None
        return min((due for due in (check, ends) if due is not None), default=None)

    async def _clock(self) -> None:
        """Ring (``_rang``) at the nearest deadline, then wait until the main loop has answered it."""
        while True:
            target = self._deadline()
            if target is None:
                await workflow.wait_condition(lambda: self._deadline() is not None)
                continue
            earlier = lambda: (deadline := self._deadline()) is not None and deadline < target  # noqa: E731, B023
            try:
                await workflow.wait_condition(earlier, timeout=max(target - workflow.now(), timedelta(milliseconds=1)))
            except TimeoutError:
                self._rang = True
                await workflow.wait_condition(lambda: not self._rang)

    async def _check_holders(self) -> None:
        """Ask Temporal about the holders of the lines least recently checked (a batch at most)."""
        self._next_check = None
        lines = self._state.lines
        names: list[str] = []
        holders = 0
        for name in list(self._held):
            if holders + len(lines[name].holders) > CHECK_BATCH and names:
                break
            names.append(name)
            holders += len(lines[name].holders)
        for name in names:  # to the back (carried across continue-as-new): the next check starts elsewhere
            del self._held[name]
            self._held[name] = None
            lines[name] = lines.pop(name)
        freed = False
        try:
            freed = await drop_gone_holders([lines[name] for name in names], bounded=True)
        except ActivityError as err:
            workflow.logger.warning("Checking the holders of %d key(s) failed: %s", len(names), err)
        finally:
            self._checking = None
            self._due.update(names)  # the next pass hands freed slots on and sets the next check
        if freed and len(self._held) > len(names):
            # Lines of holders that ended pile up faster than a batch a period: check on at once.
            self._next_check = workflow.now()


def _checked(line: KeyLine) -> bool:
    """Whether the line's holders are checked: runs of a key with few slots may end without a
    word; those of a key with many give their slot back, and are checked only if runs wait."""
    return bool(line.holders) and (line.quiet or bool(line.queue))
