"""AgentRateLimiter: a FIFO semaphore that lets runs leave PENDING in turn, one per agent.

The lock of an agent's `rateLimit` (id ``dsmo-limiter.{agent}``). Runs started before key locks
were sharded (`engine/key_locks.py`) also hold locks of this kind, one per key value (id
``dsmo-slots.{scope}.{digest}``), until they end. Runs ask for a slot with `acquire` (sent with
signal-with-start by an activity, so the lock exists when needed) and give it back with
`release`; the lock signals `SLOT_GRANTED` to each run it admits. A starter may `claim` a free
slot for a run before starting it (an update: admitted at once, or told who holds the key).

A holder that ended without giving its slot back (terminated, or reset outside DSMO) is found
by asking Temporal about the holders (`check_holders`) every ``check_every_seconds`` while a run
waits in line, so a leaked slot blocks the line at most that long. The lock continues as new
before its history grows long and ends when no run holds or waits for a slot.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

from dsmo.workflows.common import patches

with workflow.unsafe.imports_passed_through():
    from pydantic import field_validator

    from dsmo.workflows.definition.sensitive import key_digest
    from dsmo.workflows.flow.long_lived import hand_over_when_long
    from dsmo.workflows.flow.slot_grants import drop_gone_holders, signal_grant
    from dsmo.workflows.flow.slot_line import ClaimAnswer, SlotLine

__all__ = ["AgentRateLimiter", "ClaimAnswer", "LimiterState", "limiter_id"]

# workflow.patched id: a holder that asks for its slot again is granted it again.
REGRANT_PATCH = "regrant-holders"
IDLE_GRACE = timedelta(minutes=1)


def limiter_id(agent: str) -> str:
    return f"dsmo-limiter.{agent}"


class LimiterState(SlotLine):
    """A lock's state, carried across continue-as-new: its line, and whose it is.

    Attributes:
        agent: The agent (an agent's rate limit) or the key's scope.
        key: The digest of the key's value (a concurrency key's lock from before key locks were
            sharded); never the value, which an erasure of the run's subject could not reach here.
        check_every_seconds: How often holders are checked while a run waits (None: never).
    """

    agent: str
    key: str | None = None
    check_every_seconds: float | None = None

    @field_validator("key")
    @classmethod
    def _digested(cls, value: str | None) -> str | None:
        return None if value is None else key_digest(value)


@workflow.defn(name="AgentRateLimiter")
class AgentRateLimiter:
    @workflow.init
    def __init__(self, state: LimiterState) -> None:
        self._state = state
        self._changed = True
        self._regrants: list[str] = []  # holders that asked again (a run reset to before its grant)

    @workflow.run
    async def run(self, state: LimiterState) -> None:
        while True:
            await self._grant()
            await hand_over_when_long(self._state)
            self._changed = False
            idle = not self._state.holders and not self._state.queue
            checking = self._checking()
            timeout = timedelta(seconds=checking) if checking else (IDLE_GRACE if idle else None)
            try:
                await workflow.wait_condition(lambda: self._changed, timeout=timeout)
            except TimeoutError:
                if checking:
                    await self._drop_gone_holders()
                elif not self._state.holders and not self._state.queue:
                    return

    @workflow.signal
    def acquire(self, request: dict[str, Any]) -> None:
        run_id = str(request.get("run_id", ""))
        self._configure(request)
        if run_id in self._state.holders:
            self._regrants.append(run_id)  # a run reset to before it got its slot asks again
        elif run_id and run_id not in self._state.queue:
            self._state.line_up(run_id, request.get("priority"))
        self._changed = True

    @workflow.signal
    def release(self, request: dict[str, Any]) -> None:
        run_id = str(request.get("run_id", ""))
        self._state.drop(run_id)
        self._changed = True

    @workflow.update
    def claim(self, request: dict[str, Any]) -> ClaimAnswer:
        """Give ``run_id`` a slot now if one is free and nobody waits; else say who holds the key,
        and (with ``queue``) put it in line, so runs are served in the order they were started."""
        self._configure(request)
        answer, changed = self._state.claim(str(request["run_id"]), request, workflow.now())
        self._changed = self._changed or changed
        return answer

    @workflow.query
    def snapshot(self) -> LimiterState:
        return self._state

    def _configure(self, request: dict[str, Any]) -> None:
        state = self._state
        state.max_concurrent = max(1, int(request.get("max_concurrent", state.max_concurrent)))
        if request.get("key") is not None:
            state.key = key_digest(str(request["key"]))  # an older worker's ask may carry the value
        if request.get("check_every_seconds") is not None:
            state.check_every_seconds = float(request["check_every_seconds"])

    def _checking(self) -> float | None:
        """Seconds until the next check of the holders: only while a run waits behind them."""
        state = self._state
        return state.check_every_seconds if state.blocked and state.check_every_seconds else None

    async def _drop_gone_holders(self) -> None:
        freed = await drop_gone_holders([self._state])
        self._changed = self._changed or freed

    async def _grant(self) -> None:
        state = self._state
        regrants, self._regrants = self._regrants, []
        # Locks from before re-granting ignored a holder asking again; their histories replay so.
        if regrants and patches.patched(REGRANT_PATCH):
            for run_id in regrants:
                if run_id in state.holders:
                    await self._signal_grant(run_id)
        while (holder := state.next_holder()) is not None:
            await self._signal_grant(holder)

    async def _signal_grant(self, run_id: str) -> None:
        state = self._state
        grant = {"agent": state.agent}
        if state.key is not None:
            grant["lock"] = workflow.info().workflow_id
        await signal_grant(state, run_id, grant, restamp=state.key is not None)
