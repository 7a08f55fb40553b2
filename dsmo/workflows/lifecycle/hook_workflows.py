"""Webhooks out: `HookDispatch` finds what changed, `HookDelivery` POSTs one event until it is taken.

The dispatcher is one workflow per task queue that has subscribers; it delivers every
subscription. Each round is one activity that looks, every second for a minute, at the runs
visibility shows started, waiting or ended since the last look, and starts a `HookDelivery` per
subscription and event (its workflow id is the delivery's id, so an event seen twice is
delivered once). It continues as new every `ROUNDS_PER_GENERATION` rounds; while no one
subscribes, a round costs one look a second at the store. A delivery is a Temporal activity
retried with back-off: it survives any restart of workers or servers; past its budget it is
recorded as failed (`dsmo hooks failed`) and can be redelivered (`dsmo hooks redeliver`).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from dsmo.workflows.contracts.hook_io import (
    DELIVERY_WORKFLOW,
    DISPATCH_WORKFLOW,
    POST_HOOK,
    RECORD_FAILED_HOOK,
    SCAN_HOOKS,
    HookDelivery,
    HookScan,
)

ROUNDS_PER_GENERATION = 60
ROUND = timedelta(minutes=1)
_SCAN_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))


@workflow.defn(name=DISPATCH_WORKFLOW)
class HookDispatch:
    @workflow.run
    async def run(self, scan: HookScan) -> HookScan:
        """Dispatch rounds, continuing as new every `ROUNDS_PER_GENERATION` (it never returns)."""
        for _ in range(ROUNDS_PER_GENERATION):
            scan = await workflow.execute_activity(
                SCAN_HOOKS,
                scan,
                result_type=HookScan,
                start_to_close_timeout=ROUND * 2,
                heartbeat_timeout=timedelta(seconds=20),  # a dead worker's round is taken over in seconds
                retry_policy=_SCAN_RETRY,
            )
        # It never ends by itself: a subscription added while it found none is dispatched the
        # next second (ending when idle would race with the next `dsmo hooks add`).
        workflow.continue_as_new(HookScan(since=scan.since))


@workflow.defn(name=DELIVERY_WORKFLOW)
class HookDeliveryRun:
    @workflow.run
    async def run(self, delivery: HookDelivery) -> str:
        """POST the event until the receiver takes it (``delivered``), or record it as ``failed``."""
        retry = RetryPolicy(
            initial_interval=timedelta(seconds=delivery.first_retry_seconds),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(minutes=10),
            maximum_attempts=delivery.max_attempts,
            non_retryable_error_types=["SubscriptionGone"],
        )
        try:
            await workflow.execute_activity(
                POST_HOOK, delivery, start_to_close_timeout=timedelta(seconds=30), retry_policy=retry
            )
        except ActivityError as err:
            reason = str(err.cause.message if err.cause is not None and hasattr(err.cause, "message") else err)
            await workflow.execute_activity(
                RECORD_FAILED_HOOK,
                args=[delivery, reason[:500]],
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=_SCAN_RETRY,
            )
            return "failed"
        return "delivered"


HOOK_WORKFLOWS = (HookDispatch, HookDeliveryRun)
