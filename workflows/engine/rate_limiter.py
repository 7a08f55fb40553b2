"""AgentRateLimiter: one per agent, a FIFO semaphore that lets runs leave PENDING in turn.

Runs ask for a slot with `acquire` (sent with signal-with-start by an activity, so the
limiter exists when needed) and give it back with `release`; the limiter signals
`SLOT_GRANTED` to each run it admits. It continues as new before its history grows long
and ends when no run holds or waits for a slot.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import Field

    from dsmo.workflows.common.wire import WireModel

IDLE_GRACE = timedelta(minutes=1)
HISTORY_LIMIT = 2_000


def limiter_id(agent: str) -> str:
    return f"dsmo-limiter.{agent}"


class LimiterState(WireModel):
    agent: str
    max_concurrent: int = 1
    holders: list[str] = Field(default_factory=list)
    queue: list[str] = Field(default_factory=list)


@workflow.defn(name="AgentRateLimiter")
class AgentRateLimiter:
    @workflow.init
    def __init__(self, state: LimiterState) -> None:
        self._state = state
        self._changed = True

    @workflow.run
    async def run(self, state: LimiterState) -> None:
        while True:
            await self._grant()
            if workflow.info().get_current_history_length() > HISTORY_LIMIT:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._state)
            self._changed = False
            idle = not self._state.holders and not self._state.queue
            try:
                await workflow.wait_condition(lambda: self._changed, timeout=IDLE_GRACE if idle else None)
            except TimeoutError:
                if not self._state.holders and not self._state.queue:
                    return

    @workflow.signal
    def acquire(self, request: dict[str, Any]) -> None:
        run_id = str(request.get("run_id", ""))
        self._state.max_concurrent = max(1, int(request.get("max_concurrent", self._state.max_concurrent)))
        if run_id and run_id not in self._state.holders and run_id not in self._state.queue:
            self._state.queue.append(run_id)
        self._changed = True

    @workflow.signal
    def release(self, request: dict[str, Any]) -> None:
        run_id = str(request.get("run_id", ""))
        self._state.holders = [held for held in self._state.holders if held != run_id]
        self._state.queue = [queued for queued in self._state.queue if queued != run_id]
        self._changed = True

    @workflow.query
    def snapshot(self) -> LimiterState:
        return self._state

    async def _grant(self) -> None:
        state = self._state
        while state.queue and len(state.holders) < state.max_concurrent:
            run_id = state.queue.pop(0)
            state.holders.append(run_id)
            try:
                await workflow.get_external_workflow_handle(run_id).signal("SLOT_GRANTED", {"agent": state.agent})
            except Exception:  # noqa: BLE001 - a run that ended meanwhile gives its slot back
                state.holders.remove(run_id)
