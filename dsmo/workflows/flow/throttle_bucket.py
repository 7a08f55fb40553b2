"""KeyThrottle: a token bucket for one throttle key value, shared by every worker.

A definition's ``throttle`` (its starts) or a stage node's (the stage's runs) lets at most
``limit`` through per ``period`` for each key value, with bursts of up to ``burst``. Each key
value has its own bucket workflow (id ``dsmo-throttle.{owner}.{digest}``), so the rate holds
across all workers. A run asks for a token (`ask`, sent with signal-with-start by an activity)
and waits; the bucket hands out tokens in the order they were asked for, as they refill, by
signalling `SLOT_GRANTED`. Nobody is refused: a run waits as long as the rate says. The bucket
continues as new before its history grows long and ends a minute after it is full and idle.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow

from dsmo.workflows.common import patches

with workflow.unsafe.imports_passed_through():
    from pydantic import Field, field_validator

    from dsmo.workflows.common.wire import WireModel
    from dsmo.workflows.definition.sensitive import key_digest
    from dsmo.workflows.flow.long_lived import hand_over_when_long

IDLE_GRACE = timedelta(minutes=1)
# Tokens keep accruing while runs wait and are granted together: Temporal's timers fire up to
# about a second late, so a bucket that capped them at `burst` ran at about `burst` per second.
OWED_TOKENS_PATCH = "throttle-owed-tokens"
# The turn of a run that ended while it waited (cancelled, say) goes to the next in line: before,
# its token was spent on it, and the runs behind it waited a turn longer.
ENDED_TURNS_PATCH = "throttle-ended-turns-passed-on"


class BucketState(WireModel):
    """A bucket's state, carried across continue-as-new.

    Attributes:
        owner: Whose throttle it is (the agent, or ``agent.node`` for a stage's).
        key: The digest of the key's value (`key_digest`), never the value: the bucket's
            history outlives an erasure of the subjects whose runs it served.
        limit: Tokens per period.
        period_seconds: The period.
        burst: The most tokens the bucket holds.
        tokens: Tokens now (refilled from ``refilled_at`` on).
        refilled_at: When ``tokens`` was last brought up to date.
        queue: Runs waiting for a token, first asked first served.
    """

    owner: str
    key: str
    limit: int
    period_seconds: float
    burst: int = 1
    tokens: float | None = None
    refilled_at: datetime | None = None
    queue: list[str] = Field(default_factory=list)

    @field_validator("key")
    @classmethod
    def _digested(cls, value: str) -> str:
        # A bucket carried over from before (or started by an older worker) held the value itself.
        return key_digest(value)


@workflow.defn(name="KeyThrottle")
class KeyThrottle:
    @workflow.init
    def __init__(self, state: BucketState) -> None:
        self._state = state
        self._changed = True
        self._owed: bool | None = None  # OWED_TOKENS_PATCH, asked once, where first needed

    @workflow.run
    async def run(self, state: BucketState) -> None:
        while True:
            await self._grant()
            await hand_over_when_long(self._state)
            self._changed = False
            bucket = self._state
            if bucket.queue:
                timeout: timedelta | None = self._until_next_token()
            else:
                timeout = IDLE_GRACE
            try:
                await workflow.wait_condition(lambda: self._changed, timeout=timeout)
            except TimeoutError:
                self._refill()
                if not bucket.queue and (bucket.tokens or 0) >= bucket.burst:
                    return  # full and nobody asked for a while: a new ask starts a full bucket again

    @workflow.signal
    def ask(self, request: dict[str, Any]) -> None:
        """``run_id`` wants a token (its settings come along, in case the definition changed)."""
        bucket = self._state
        self._refill()
        bucket.limit = max(1, int(request.get("limit", bucket.limit)))
        bucket.period_seconds = float(request.get("period_seconds", bucket.period_seconds))
        bucket.burst = max(1, int(request.get("burst", bucket.burst)))
        run_id = str(request.get("run_id", ""))
        if run_id and run_id not in bucket.queue:
            bucket.queue.append(run_id)
        self._changed = True

    @workflow.query
    def snapshot(self) -> BucketState:
        return self._state

    def _owes(self) -> bool:
        if self._owed is None:
            self._owed = patches.patched(OWED_TOKENS_PATCH)
        return self._owed

    def _refill(self) -> None:
        bucket, now = self._state, workflow.now()
        if bucket.tokens is None or bucket.refilled_at is None:
            bucket.tokens, bucket.refilled_at = float(bucket.burst), now
            return
        rate = bucket.limit / bucket.period_seconds
        elapsed = (now - bucket.refilled_at).total_seconds()
        tokens = bucket.tokens + elapsed * rate
        # `burst` bounds what an idle bucket saves up; while runs wait, the time since the last
        # grant is owed to them (`ask` refills before it queues, so idle time stays capped).
        owed = bool(bucket.queue) and self._owes()
        bucket.tokens = tokens if owed else min(float(bucket.burst), tokens)
        bucket.refilled_at = now

    def _until_next_token(self) -> timedelta:
        bucket = self._state
        rate = bucket.limit / bucket.period_seconds
        missing = max(0.0, 1.0 - (bucket.tokens or 0.0))
        return timedelta(seconds=max(missing / rate, 0.001))

    async def _grant(self) -> None:
        bucket = self._state
        self._refill()
        if bucket.queue and self._owes():
            while True:
                due: list[str] = []
                while bucket.queue and (bucket.tokens or 0.0) >= 1.0:
                    due.append(bucket.queue.pop(0))
                    bucket.tokens = (bucket.tokens or 0.0) - 1.0
                # Signalled together (one workflow task), not one round trip each.
                granted = await asyncio.gather(*(self._signal(run_id) for run_id in due))
                ended = granted.count(False)
                if not ended or not patches.patched(ENDED_TURNS_PATCH):
                    return
                bucket.tokens = (bucket.tokens or 0.0) + ended  # and handed on to the next in line
        while bucket.queue and (bucket.tokens or 0.0) >= 1.0:
            run_id = bucket.queue.pop(0)
            bucket.tokens = (bucket.tokens or 0.0) - 1.0
            grant = {"agent": bucket.owner, "lock": workflow.info().workflow_id}
            try:
                await workflow.get_external_workflow_handle(run_id).signal("SLOT_GRANTED", grant)
            except Exception:  # noqa: BLE001 - a run that ended meanwhile needs no token
                continue

    async def _signal(self, run_id: str) -> bool:
        """Give ``run_id`` its token; False if it has ended (it needs none)."""
        grant = {"agent": self._state.owner, "lock": workflow.info().workflow_id}
        try:
            await workflow.get_external_workflow_handle(run_id).signal("SLOT_GRANTED", grant)
        except Exception:  # noqa: BLE001 - a run that ended meanwhile needs no token
            return False
        return True
