"""What the webhook workflows and their activities exchange: a scan of what changed, one delivery.

A delivery carries references and what visibility says of a run (its agent, status, wait), never
a run's data: its helper workflow's history holds nothing erasure would have to reach.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from dsmo.workflows.common.wire import WireModel

DISPATCH_WORKFLOW = "DsmoHookDispatch"
DELIVERY_WORKFLOW = "DsmoHookDelivery"
DISPATCH_ID = "dsmo-hook-dispatch"  # with the task queue: one dispatcher per queue that has subscribers
SCAN_HOOKS = "scan_hooks"
POST_HOOK = "post_hook"
RECORD_FAILED_HOOK = "record_failed_hook"
# The events a subscription may name: a run's start, each wait, and its end.
HOOK_EVENTS = ("RUN_CREATED", "RUN_WAITING", "RUN_COMPLETED", "RUN_ABORTED")


class HookScan(WireModel):
    """One round of the dispatcher: from when it looks for changes.

    Attributes:
        since: Changes from this time on are dispatched (None: from now).
        started: Deliveries this round started.
    """

    since: datetime | None = None
    started: int = 0


class HookDelivery(WireModel):
    """One event to POST to one subscriber, retried with back-off until it is taken or its budget ends.

    Attributes:
        delivery_id: The same on every attempt and redelivery: a receiver deduplicates by it.
        subscription: The subscription's id (its URL and secret are read when the POST is made).
        event: One of `HOOK_EVENTS`.
        run_id: The run.
        agent: Its agent.
        status: Its status at the event (``waiting``, ``completed``, ``failed``, ...).
        waiting_for: For ``RUN_WAITING``: what the run waits for.
        at: When the event happened.
        max_attempts: POSTs at most before the delivery is set aside as failed.
        first_retry_seconds: The wait before the second POST; each next one doubles (up to 10 min).
    """

    delivery_id: str
    subscription: str
    event: str
    run_id: str
    agent: str
    status: str
    waiting_for: str | None = None
    at: datetime
    max_attempts: int = Field(default=12, ge=1, le=100)
    first_retry_seconds: float = Field(default=1.0, gt=0, le=3600)
