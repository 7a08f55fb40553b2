"""Webhook subscriptions from the client: `client.hooks` (the CLI's `dsmo hooks` and the API's `/hooks`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from dsmo.activities.hook_activities import delivery_workflow_id
from dsmo.activities.hook_store import HookError, HookStore, Subscription, checked
from dsmo.client.core import ClientCore
from dsmo.workflows.contracts.hook_io import DELIVERY_WORKFLOW, DISPATCH_ID, DISPATCH_WORKFLOW, HookDelivery, HookScan

__all__ = ["HookError", "Hooks", "Subscription"]


def dispatcher_id(task_queue: str) -> str:
    """The workflow id of the dispatcher whose workers serve ``task_queue``."""
    return f"{DISPATCH_ID}:{task_queue}"


class Hooks:
    """Webhook subscriptions: each matching event of a run is POSTed, signed, to the subscriber.

    Args:
        core: The client's core.
    """

    def __init__(self, core: ClientCore) -> None:
        self._core = core

    @property
    def _store(self) -> HookStore:
        return HookStore(self._core.artifacts)

    async def add(
        self,
        url: str,
        events: Sequence[str],
        *,
        agent: str | None = None,
        max_attempts: int = 12,
        first_retry_seconds: float = 1.0,
    ) -> Subscription:
        """Subscribe ``url`` to ``events`` (of ``agent``'s runs, or every run's from now on).

        Args:
            url: Where each event is POSTed.
            events: Some of ``RUN_CREATED``, ``RUN_WAITING``, ``RUN_COMPLETED``, ``RUN_ABORTED``.
            agent: Only this agent's runs (None: every agent's).
            max_attempts: POSTs of one event at most before it is set aside as failed.
            first_retry_seconds: The wait before the second POST; each next one doubles (up to 10 min).

        Returns:
            The subscription, with its secret: keep it, it is not shown again.

        Raises:
            HookError: A field is not valid (named).
        """
        checked(url, events, max_attempts, first_retry_seconds, agent)  # a bad field starts nothing
        # The dispatcher first (one per task queue; a start while it runs is the same one): a
        # subscription is never written with no one to deliver it.
        queue = self._core.settings.temporal.task_queue
        await self._core.temporal.start_workflow(
            DISPATCH_WORKFLOW,
            HookScan(),
            id=dispatcher_id(queue),
            task_queue=queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )
        made = await asyncio.to_thread(
            self._store.add,
            url,
            events,
            agent=agent,
            max_attempts=max_attempts,
            first_retry_seconds=first_retry_seconds,
        )
        return made

    async def __call__(self) -> list[Subscription]:
        """Every subscription (with its secret: show `Subscription.shown` to people)."""
        return await asyncio.to_thread(self._store.subscriptions)

    async def remove(self, subscription_id: str) -> bool:
        """Remove a subscription (its deliveries in flight stop); False if there is none by that id."""
        return await asyncio.to_thread(self._store.remove, subscription_id)

    async def failed(self) -> list[dict[str, Any]]:
        """The deliveries past their budget, oldest first, with why the last POST failed."""
        return await asyncio.to_thread(self._store.failed)

    async def redeliver(self, delivery_id: str) -> str:
        """Deliver a failed delivery again, with the same delivery id and a fresh budget.

        Returns:
            The workflow id of the new delivery.

        Raises:
            HookError: No failed delivery has this id.
        """
        record = await asyncio.to_thread(self._store.failed_one, delivery_id)
        delivery = HookDelivery.model_validate({k: v for k, v in record.items() if k not in ("reason", "failedAt")})
        workflow_id = f"{delivery_workflow_id(delivery_id)}.r{time.time_ns()}"
        await self._core.temporal.start_workflow(
            DELIVERY_WORKFLOW, delivery, id=workflow_id, task_queue=self._core.settings.temporal.task_queue
        )
        # Forgotten only once it is on its way: a start that failed leaves it listed.
        await asyncio.to_thread(self._store.forget_failed, delivery_id)
        return workflow_id
