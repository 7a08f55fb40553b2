"""KeyLocks: the lines of a scope's concurrency key values, spread by hash over a fixed set of shards.

A definition's concurrency key (`definition/flow_control.py`) gives every key value a line of
its own: who holds its slots, who waits, first come first served (`engine/slot_line.py`). The
lines of one scope (an agent, or a group) live in `KEY_SHARDS` long-lived workflows, a key value
always in the same one (id ``dsmo-keys.{scope}.{shard}``): a new key value costs no new
workflow, one shard's workflow task serves the claims and releases of all its keys that arrived
together, and no workflow serves every run of a deployment.

Runs ask for a slot with `acquire` (sent with signal-with-start by an activity) and give it back
with `release`; the shard signals `SLOT_GRANTED` to each run it admits. A starter may `claim` a
free slot for a run before starting it (an update: admitted at once, or told who holds the key).
A holder that ended without giving its slot back (terminated, or reset outside DSMO) is found by
asking Temporal about the holders of lines where runs wait, every ``check_every_seconds``
however busy the shard's other keys are. The shard carries only lines in use across
continue-as-new, and ends a minute after its last line emptied.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import Field

    from dsmo.workflows.common.wire import WireModel
    from dsmo.workflows.engine.slot_grants import drop_gone_holders, signal_grant
    from dsmo.workflows.engine.slot_line import ClaimAnswer, SlotLine

IDLE_GRACE = timedelta(minutes=1)
HISTORY_LIMIT = 2_000
CHECK_BATCH = 200  # holders one check asks Temporal about; lines beyond wait for the next check


class KeyLine(SlotLine):
    """One key value's line.

    Attributes:
        key: The key's value, shown in status and the console.
    """

    key: str = ""


class KeyLocksState(WireModel):
    """A shard's state, carried across continue-as-new: only lines someone holds or waits in.

    Attributes:
        owner: The scope: the agent, or ``group-<name>``.
        lines: The lines by key digest.
        check_every_seconds: How often holders are checked while a run waits (None: never).
    """

    owner: str
    lines: dict[str, KeyLine] = Field(default_factory=dict)
    check_every_seconds: float | None = None


@workflow.defn(name="DsmoKeyLocks")
class KeyLocks:
    @workflow.init
    def __init__(self, state: KeyLocksState) -> None:
        self._state = state
        self._due: set[str] = set(state.lines)  # lines that changed: a slot to hand on, or idle now
        self._regrants: list[tuple[str, str]] = []  # (line, holder) that asked again
        # Lines where runs wait behind holders, oldest first: their holders are checked.
        self._blocked: dict[str, None] = {}
        self._next_check: datetime | None = None
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
                if self._next_check is not None and now >= self._next_check:
                    await self._check_holders()
                    continue
                if self._idle_since is not None and now - self._idle_since >= IDLE_GRACE:
                    clock.cancel()
                    return
            if workflow.info().get_current_history_length() > HISTORY_LIMIT:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._state)
            await workflow.wait_condition(lambda: bool(self._due or self._regrants or self._rang))

    @workflow.signal
    def acquire(self, request: dict[str, Any]) -> None:
        run_id, name = str(request.get("run_id", "")), str(request.get("line", ""))
        line = self._line(name, request)
        if run_id in line.holders:
            self._regrants.append((name, run_id))  # a run reset to before it got its slot asks again
        elif run_id and run_id not in line.queue:
            line.line_up(run_id, request.get("priority"))
        self._due.add(name)

    @workflow.signal
    def release(self, request: dict[str, Any]) -> None:
        name = str(request.get("line", ""))
        line = self._state.lines.get(name)
        if line is not None:
            line.drop(str(request.get("run_id", "")))
            self._due.add(name)

    @workflow.update
    def claim(self, request: dict[str, Any]) -> ClaimAnswer:
        """Give ``run_id`` a slot of the key now if one is free and nobody waits; else say who
        holds it, and (with ``queue``) put the run in line, so runs are served in the order they
        were started."""
        name = str(request["line"])
        answer, changed = self._line(name, request).claim(str(request["run_id"]), request, workflow.now())
        if changed:
            self._due.add(name)
        return answer

    @workflow.query
    def line(self, name: str) -> KeyLine | None:
        """One key value's line, by its digest."""
        return self._state.lines.get(name)

    @workflow.query
    def snapshot(self) -> KeyLocksState:
        return self._state

    def _line(self, name: str, request: dict[str, Any]) -> KeyLine:
        line = self._state.lines.get(name)
        if line is None:
            line = self._state.lines[name] = KeyLine(key=str(request.get("key") or ""))
        line.max_concurrent = max(1, int(request.get("max_concurrent", line.max_concurrent)))
        if request.get("check_every_seconds") is not None:
            self._state.check_every_seconds = float(request["check_every_seconds"])
        return line

    async def _grant(self) -> set[str]:
        """Hand free slots on to the first in line of the lines that changed; those lines."""
        owner, shard = self._state.owner, workflow.info().workflow_id
        signals = []
        regrants, self._regrants = self._regrants, []
        for name, run_id in regrants:
            line = self._state.lines.get(name)
            if line is not None and run_id in line.holders:
                signals.append((name, run_id))
        due, self._due = self._due, set()
        for name in sorted(due):  # sorted: the same signals in the same order on replay
            line = self._state.lines.get(name)
            while line is not None and (holder := line.next_holder()) is not None:
                signals.append((name, holder))
        # One workflow task sends them all: a shard's grants do not wait for each other.
        await asyncio.gather(
            *(
                signal_grant(self._state.lines[name], run_id, {"agent": owner, "lock": f"{shard}/{name}"}, restamp=True)
                for name, run_id in signals
            )
        )
        return due | {name for name, _ in signals}

    def _settle(self, changed: set[str]) -> None:
        """Forget lines that emptied, note those where runs wait behind holders, set the deadlines.

        Only the lines that changed are looked at: one pass's work does not grow with the shard.
        """
        lines, now = self._state.lines, workflow.now()
        for name in sorted(changed):
            line = lines.get(name)
            if line is not None and line.idle:
                del lines[name]
            if line is not None and line.blocked:
                self._blocked.setdefault(name, None)
            else:
                self._blocked.pop(name, None)
        every = self._state.check_every_seconds
        if not self._blocked or not every:
            self._next_check = None
        elif self._next_check is None:
            self._next_check = now + timedelta(seconds=every)
        self._idle_since = None if lines else (self._idle_since or now)

    def _deadline(self) -> datetime | None:
        """When the clock next rings: the holders' check, or the end of an idle shard."""
        ends = self._idle_since + IDLE_GRACE if self._idle_since is not None else None
        return min((due for due in (self._next_check, ends) if due is not None), default=None)

    async def _clock(self) -> None:
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
        self._next_check = None
        lines = self._state.lines
        names: list[str] = []
        holders = 0
        for name in list(self._blocked):
            if holders + len(lines[name].holders) > CHECK_BATCH and names:
                break
            names.append(name)
            holders += len(lines[name].holders)
        for name in names:  # to the back: the next check starts with the lines this one left out
            del self._blocked[name]
            self._blocked[name] = None
        if await drop_gone_holders([lines[name] for name in names]):
            self._due.update(names)
