"""Which workers poll a task queue now, asked of Temporal: the one question both the client (is
anyone there to run this?) and provisioning (did the worker come up?) ask."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

# A live worker long-polls and polls again within about a minute; the server lists a poller
# for minutes after its worker is gone, with the time its last poll began.
POLLER_LIVE_FOR = timedelta(seconds=75)


async def live_pollers(client: Client, task_queue: str, *, now: datetime | None = None) -> list[str]:
    """Identities of the workers that polled ``task_queue`` for workflow tasks within a minute or so."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    cutoff = (now or datetime.now(UTC)) - POLLER_LIVE_FOR
    return [poller.identity for poller in response.pollers if poller.last_access_time.ToDatetime(tzinfo=UTC) >= cutoff]
