"""AgentRateLimiter: a FIFO semaphore that lets runs leave PENDING in turn, one per lock.

A lock is an agent's `rateLimit` (id ``dsmo-limiter.{agent}``) or one value of a definition's
concurrency key (``dsmo-slots.{scope}.{digest}``, see `definition/flow_control.py`): every key
value has its own workflow, so no deployment-wide workflow serves every run, and a busy key
never slows another. Runs ask for a slot with `acquire` (sent with signal-with-start by an
activity, so the lock exists when needed) and give it back with `release`; the lock signals
`SLOT_GRANTED` to each run it admits. A starter may `claim` a free slot for a run before
starting it (an update: admitted at once, or told who holds the key).

A holder that ended without giving its slot back (terminated, or reset outside DSMO) is found
by asking Temporal about the holders (`check_holders`) every ``check_every_seconds`` while a run
waits in line, so a leaked slot blocks the line at most that long. The lock continues as new
before its history grows long and ends when no run holds or waits for a slot.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import Field

    from dsmo.workflows.common.wire import WireModel
    from dsmo.workflows.contracts.slot_io import CHECK_HOLDERS, HolderCheck, HolderStates

# workflow.patched id: a holder that asks for its slot again is granted it again.
REGRANT_PATCH = "regrant-holders"
IDLE_GRACE = timedelta(minutes=1)
DEFAULT_PRIORITY = 3  # a run started without a priority, as Temporal's task queues count it
HISTORY_LIMIT = 2_000
# A holder claimed by a starter may not have started yet: it is not counted as gone before this.
CLAIM_GRACE = timedelta(seconds=30)


def limiter_id(agent: str) -> str:
    return f"dsmo-limiter.{agent}"


class LimiterState(WireModel):
    """A lock's state, carried across continue-as-new.

    Attributes:
        agent: The agent (an agent's rate limit) or the key's scope.
        max_concurrent: How many runs may hold a slot at once.
        holders: The runs holding a slot, in the order they got it.
        queue: The runs waiting for one, first in line first.
        key: The key's value (a concurrency key's lock), shown in status and the console.
        check_every_seconds: How often holders are checked while a run waits (None: never).
        since: When each holder got its slot, or a starter put a run in line (see `claim`).
        priorities: The priority of each run in line that has one (1 highest to 5; others 3).
    """

    agent: str
    max_concurrent: int = 1
    holders: list[str] = Field(default_factory=list)
    queue: list[str] = Field(default_factory=list)
    key: str | None = None
    check_every_seconds: float | None = None
    since: dict[str, datetime] = Field(default_factory=dict)
    priorities: dict[str, int] = Field(default_factory=dict)


class ClaimAnswer(WireModel):
    """What `claim` answered: the run holds a slot now, or who holds the key and how long the line is."""

    admitted: bool
    holders: list[str] = Field(default_factory=list)
    waiting: int = 0


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
            if workflow.info().get_current_history_length() > HISTORY_LIMIT:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._state)
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
            self._line_up(run_id, request.get("priority"))
        self._changed = True

    @workflow.signal
    def release(self, request: dict[str, Any]) -> None:
        run_id = str(request.get("run_id", ""))
        self._drop(run_id)
        self._changed = True

    @workflow.update
    def claim(self, request: dict[str, Any]) -> ClaimAnswer:
        """Give ``run_id`` a slot now if one is free and nobody waits; else say who holds the key,
        and (with ``queue``) put it in line, so runs are served in the order they were started."""
        state = self._state
        run_id = str(request["run_id"])
        self._configure(request)
        if run_id in state.holders:
            return ClaimAnswer(admitted=True)
        if len(state.holders) < state.max_concurrent and not state.queue:
            state.holders.append(run_id)
            state.since[run_id] = workflow.now()
            self._changed = True
            return ClaimAnswer(admitted=True)
        answer = ClaimAnswer(admitted=False, holders=list(state.holders), waiting=len(state.queue))
        if request.get("queue") and run_id not in state.queue:
            self._line_up(run_id, request.get("priority"))
            state.since[run_id] = workflow.now()
            self._changed = True  # someone waits now: the holders are checked from here on
        return answer

    @workflow.query
    def snapshot(self) -> LimiterState:
        return self._state

    def _configure(self, request: dict[str, Any]) -> None:
        state = self._state
        state.max_concurrent = max(1, int(request.get("max_concurrent", state.max_concurrent)))
        if request.get("key") is not None:
            state.key = str(request["key"])
        if request.get("check_every_seconds") is not None:
            state.check_every_seconds = float(request["check_every_seconds"])

    def _checking(self) -> float | None:
        """Seconds until the next check of the holders: only while a run waits behind them."""
        state = self._state
        return state.check_every_seconds if state.queue and state.holders and state.check_every_seconds else None

    def _line_up(self, run_id: str, priority: Any) -> None:
        """In line behind every run of the same or a higher priority (1 highest; none is 3)."""
        state = self._state
        level = DEFAULT_PRIORITY if priority is None else int(priority)
        if priority is not None:
            state.priorities[run_id] = level
        ahead = [queued for queued in state.queue if state.priorities.get(queued, DEFAULT_PRIORITY) <= level]
        place = state.queue.index(ahead[-1]) + 1 if ahead else 0
        state.queue.insert(place, run_id)

    def _drop(self, run_id: str) -> None:
        state = self._state
        state.holders = [held for held in state.holders if held != run_id]
        state.queue = [queued for queued in state.queue if queued != run_id]
        state.since.pop(run_id, None)
        state.priorities.pop(run_id, None)

    async def _drop_gone_holders(self) -> None:
        state = self._state
        found: HolderStates = await workflow.execute_activity(
            CHECK_HOLDERS,
            HolderCheck(runs=list(state.holders)),
            result_type=HolderStates,
            start_to_close_timeout=timedelta(seconds=30),
        )
        # A holder not found may be one a starter claimed a slot for and is starting now.
        settled = workflow.now() - CLAIM_GRACE
        missing = [run for run in found.missing if state.since.get(run, settled) <= settled]
        gone = [*found.ended, *missing]
        for run_id in gone:
            workflow.logger.warning("Slot of %s given back: the run ended without giving it back", run_id)
            self._drop(run_id)
        self._changed = self._changed or bool(gone)

    async def _grant(self) -> None:
        state = self._state
        regrants, self._regrants = self._regrants, []
        # Locks from before re-granting ignored a holder asking again; their histories replay so.
        if regrants and workflow.patched(REGRANT_PATCH):
            for run_id in regrants:
                if run_id in state.holders:
                    await self._signal_grant(run_id)
        while state.queue and len(state.holders) < state.max_concurrent:
            run_id = state.queue.pop(0)
            state.priorities.pop(run_id, None)
            state.holders.append(run_id)
            await self._signal_grant(run_id)

    async def _signal_grant(self, run_id: str) -> None:
        state = self._state
        grant = {"agent": state.agent}
        if state.key is not None:
            grant["lock"] = workflow.info().workflow_id
        joined = state.since.get(run_id)
        if state.key is not None:
            state.since[run_id] = workflow.now()
        try:
            await workflow.get_external_workflow_handle(run_id).signal("SLOT_GRANTED", grant)
        except Exception:  # noqa: BLE001 - a run that ended meanwhile gives its slot back
            if joined is not None and workflow.now() - joined < CLAIM_GRACE:
                # Put in line by a starter an instant ago: the run has not started yet. It asks
                # for its slot when it does, and is granted it again then.
                return
            self._drop(run_id)
