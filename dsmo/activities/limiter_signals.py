"""Activities that talk to locks (rate limiters, key locks, throttle buckets): signal-with-start needs a client."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from dsmo.workflows.contracts.activity_io import RELEASE_SLOT, REQUEST_SLOT, REQUEST_TOKEN
from dsmo.workflows.contracts.slot_io import CHECK_HOLDERS, HolderCheck, HolderStates, SlotRequest, TokenRequest
from dsmo.workflows.definition.flow_control import release_of, shard_of
from dsmo.workflows.flow.key_locks import KeyLocks, KeyLocksState
from dsmo.workflows.flow.rate_limiter import AgentRateLimiter, LimiterState, limiter_id
from dsmo.workflows.flow.throttle_bucket import BucketState, KeyThrottle


class LimiterActivities:
    """Asking a lock for a slot, giving one back, and telling a lock which holders have ended.

    Args:
        client: The Temporal client.
        task_queue: Where locks run when the activity's own task queue is unknown.
        holder_check_seconds: How often a concurrency key's lock checks its holders while a run
            waits in line (`WorkerSettings.slot_holder_check_seconds`).
    """

    def __init__(self, client: Client, task_queue: str, holder_check_seconds: int = 60) -> None:
        self.client = client
        self.task_queue = task_queue
        self.holder_check_seconds = holder_check_seconds

    @activity.defn(name=REQUEST_SLOT)
    async def request_slot(self, request: SlotRequest) -> None:
        await self._signal("acquire", request)

    @activity.defn(name=RELEASE_SLOT)
    async def release_slot(self, request: SlotRequest) -> None:
        if request.lock is None:  # the agent's rate limit: as it always was
            await self._signal("release", request)
            return
        # A plain signal: a lock runs while one of its slots is held or waited for, and a lock
        # that ended (terminated by hand) keeps no slot to give back.
        shard, release = release_of(request.lock, request.run_id)
        try:
            await self.client.get_workflow_handle(shard).signal("release", release)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise

    @activity.defn(name=REQUEST_TOKEN)
    async def request_token(self, request: TokenRequest) -> None:
        # Signal-with-start: the bucket is created, full, by the first run that needs it.
        ask = {"run_id": request.run_id, "limit": request.limit, "period_seconds": request.period_seconds}
        await self.client.start_workflow(
            KeyThrottle.run,
            BucketState(
                owner=request.owner,
                key=request.key,
                limit=request.limit,
                period_seconds=request.period_seconds,
                burst=request.burst,
            ),
            id=request.bucket,
            task_queue=activity.info().task_queue or self.task_queue,
            start_signal="ask",
            start_signal_args=[{**ask, "burst": request.burst}],
        )

    @activity.defn(name=CHECK_HOLDERS)
    async def check_holders(self, check: HolderCheck) -> HolderStates:
        """The holders that are not running: ended (terminated, ...) or not found."""
        states = await asyncio.gather(*(self._state(run_id) for run_id in check.runs))
        found = list(zip(check.runs, states, strict=True))
        return HolderStates(
            ended=[run_id for run_id, state in found if state == "ended"],
            missing=[run_id for run_id, state in found if state == "missing"],
        )

    async def _state(self, run_id: str) -> str:
        try:
            described = await self.client.get_workflow_handle(run_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return "missing"
            raise
        return "running" if described.status == WorkflowExecutionStatus.RUNNING else "ended"

    async def _signal(self, name: str, request: SlotRequest) -> None:
        # Signal-with-start: the lock is created by the first run that needs it.
        signal: dict[str, object] = {"run_id": request.run_id, "max_concurrent": request.max_concurrent}
        task_queue = activity.info().task_queue or self.task_queue
        if request.lock is None:  # the agent's rate limit
            state = LimiterState(agent=request.agent, max_concurrent=request.max_concurrent)
            await self._start(AgentRateLimiter.run, state, limiter_id(request.agent), name, signal, task_queue)
            return
        # A concurrency key's: its value, how often to check holders, the run's place in line.
        signal.update(key=request.key, check_every_seconds=self.holder_check_seconds, priority=request.priority)
        shard, line = shard_of(request.lock)
        if line is None:  # a key value's own lock, taken by a run started before locks were sharded
            state = LimiterState(agent=request.agent, max_concurrent=request.max_concurrent, key=request.key)
            await self._start(AgentRateLimiter.run, state, shard, name, signal, task_queue)
        else:
            await self._start(
                KeyLocks.run, KeyLocksState(owner=request.agent), shard, name, {**signal, "line": line}, task_queue
            )

    async def _start(
        self, run: Any, state: Any, workflow_id: str, signal: str, arg: dict[str, object], task_queue: str
    ) -> None:
        await self.client.start_workflow(
            run, state, id=workflow_id, task_queue=task_queue, start_signal=signal, start_signal_args=[arg]
        )
