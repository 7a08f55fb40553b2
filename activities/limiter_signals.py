"""Activities that talk to locks (AgentRateLimiter workflows): signal-with-start needs a client."""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from dsmo.workflows.contracts.activity_io import RELEASE_SLOT, REQUEST_SLOT, REQUEST_TOKEN
from dsmo.workflows.contracts.slot_io import CHECK_HOLDERS, HolderCheck, HolderStates, SlotRequest, TokenRequest
from dsmo.workflows.engine.rate_limiter import AgentRateLimiter, LimiterState, limiter_id
from dsmo.workflows.engine.throttle_bucket import BucketState, KeyThrottle


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
        await self._signal("release", request)

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
        signal = {"run_id": request.run_id, "max_concurrent": request.max_concurrent}
        if request.lock is not None:  # a concurrency key's lock: its value, and how often to check holders
            signal.update(key=request.key, check_every_seconds=self.holder_check_seconds, priority=request.priority)
        await self.client.start_workflow(
            AgentRateLimiter.run,
            LimiterState(agent=request.agent, max_concurrent=request.max_concurrent, key=request.key),
            id=request.lock or limiter_id(request.agent),
            task_queue=activity.info().task_queue or self.task_queue,
            start_signal=name,
            start_signal_args=[signal],
        )
