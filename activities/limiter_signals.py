"""Activities that talk to an agent's AgentRateLimiter (signal-with-start needs a client)."""

from __future__ import annotations

from temporalio import activity
from temporalio.client import Client

from dsmo.workflows.contracts.activity_io import RELEASE_SLOT, REQUEST_SLOT, SlotRequest
from dsmo.workflows.engine.rate_limiter import AgentRateLimiter, LimiterState, limiter_id


class LimiterActivities:
    def __init__(self, client: Client, task_queue: str) -> None:
        self.client = client
        self.task_queue = task_queue

    @activity.defn(name=REQUEST_SLOT)
    async def request_slot(self, request: SlotRequest) -> None:
        await self._signal("acquire", request)

    @activity.defn(name=RELEASE_SLOT)
    async def release_slot(self, request: SlotRequest) -> None:
        await self._signal("release", request)

    async def _signal(self, name: str, request: SlotRequest) -> None:
        # Signal-with-start: the limiter is created by the first run that needs it.
        await self.client.start_workflow(
            AgentRateLimiter.run,
            LimiterState(agent=request.agent, max_concurrent=request.max_concurrent),
            id=limiter_id(request.agent),
            task_queue=activity.info().task_queue or self.task_queue,
            start_signal=name,
            start_signal_args=[{"run_id": request.run_id, "max_concurrent": request.max_concurrent}],
        )
