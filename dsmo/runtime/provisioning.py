"""Health checks and one-time set-up of the servers DSMO uses, shared by workers, the dev stack and tests."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from datetime import timedelta

from botocore.exceptions import BotoCoreError, ClientError
from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import IndexedValueType, TaskQueueType
from temporalio.api.namespace.v1 import NamespaceConfig
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, UpdateNamespaceRequest
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
)
from temporalio.service import RPCError, RPCStatusCode

from dsmo.config.settings import Settings
from dsmo.runtime.storage import s3_client
from dsmo.runtime.task_queue_pollers import live_pollers
from dsmo.workflows.common import search_attributes
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.retention_io import SWEEP_WORKFLOW
from dsmo.workflows.lifecycle.retention_sweep import SweepStart

log = logging.getLogger("dsmo.worker")

HEALTH_KEY = "_health/probe"


class StackError(DsmoError):
    """A server DSMO needs (Temporal, the object store) is missing, unreachable or unusable."""

    code = "stack_error"


async def temporal_reachable(address: str, namespace: str, timeout: float = 2.0) -> bool:
    try:
        client = await asyncio.wait_for(Client.connect(address, namespace=namespace), timeout)
        await asyncio.wait_for(client.service_client.check_health(), timeout)
    except Exception:  # noqa: BLE001 - any failure to connect means "not healthy yet"
        return False
    return True


async def ensure_search_attributes(address: str, namespace: str) -> list[str]:
    """Register the contract's search attributes that the server lacks; returns those added.

    `temporal server start-dev --search-attribute` registers them only when it creates a new
    database file, so a stack restarted on an older file needs this too.
    """
    client = await Client.connect(address, namespace=namespace)
    return await ensure_search_attributes_on(client)


async def ensure_search_attributes_on(client: Client) -> list[str]:
    namespace = client.namespace
    wanted = {
        key.name: IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{search_attributes.cli_type(key).upper()}")
        for key in search_attributes.ALL
    }
    try:
        existing = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
        missing = {name: kind for name, kind in wanted.items() if name not in existing.custom_attributes}
    except RPCError as err:
        # The time-skipping test server can add search attributes but not list them.
        if err.status != RPCStatusCode.UNIMPLEMENTED:
            raise
        missing = wanted
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
    return sorted(missing)


def ensure_bucket(settings: Settings) -> None:
    s3 = s3_client(settings)
    try:
        s3.head_bucket(Bucket=settings.store.bucket)
        return
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
            raise StackError(f"DSMO_ARTIFACT_BUCKET: cannot use bucket {settings.store.bucket!r}: {err}") from None
    except BotoCoreError as err:
        raise StackError(f"AWS_ENDPOINT_URL_S3: {settings.store.endpoint} does not answer: {err}") from None
    try:
        s3.create_bucket(Bucket=settings.store.bucket)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise StackError(f"DSMO_ARTIFACT_BUCKET: cannot create {settings.store.bucket!r}: {err}") from None


def s3_round_trip(settings: Settings) -> bool:
    """True if the store accepts a write and returns it (creating the bucket if needed)."""
    try:
        ensure_bucket(settings)
        s3 = s3_client(settings)
        s3.put_object(Bucket=settings.store.bucket, Key=HEALTH_KEY, Body=b"ok")
        return s3.get_object(Bucket=settings.store.bucket, Key=HEALTH_KEY)["Body"].read() == b"ok"
    except (StackError, ClientError, BotoCoreError):
        return False


async def any_worker_polling(settings: Settings) -> bool:
    """True if a live worker (any process) polls the settings' task queue."""
    try:
        client = await Client.connect(settings.temporal.address, namespace=settings.temporal.namespace)
        return bool(await live_pollers(client, settings.temporal.task_queue))
    except Exception:  # noqa: BLE001 - no server, no worker
        return False


async def worker_polling(settings: Settings, pid: int) -> bool:
    """True once the worker process ``pid`` polls the settings' task queue."""
    try:
        client = await Client.connect(settings.temporal.address, namespace=settings.temporal.namespace)
        response = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=settings.temporal.namespace,
                task_queue=TaskQueue(name=settings.temporal.task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
    except Exception:  # noqa: BLE001
        return False
    return any(poller.identity.startswith(f"{pid}@") for poller in response.pollers)


def sweep_schedule_id(task_queue: str) -> str:
    return f"dsmo-retention-sweep.{task_queue}"


async def ensure_worker_search_attributes(client: Client) -> None:
    """Register the contract's search attributes the namespace lacks: an upsert of an unknown one fails the run.

    Raises:
        StackError: The namespace lacks some and this worker may not add them.
    """
    try:
        added = await ensure_search_attributes_on(client)
    except RPCError as err:
        raise StackError(
            f"search attributes: namespace {client.namespace!r} lacks some of DSMO's and this worker cannot add them "
            f"({err.message}); register them with `temporal operator search-attribute create`"
        ) from None
    if added:
        log.info("registered search attributes %s on namespace %s", ", ".join(added), client.namespace)


async def ensure_sweep_schedule(client: Client, settings: Settings) -> None:
    """Create the retention sweep's Temporal Schedule for this task queue, unless it exists.

    Every ``DSMO_RETENTION_SWEEP_EVERY``; a sweep still running when the next is due makes it skip.
    """
    queue = settings.temporal.task_queue
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(SWEEP_WORKFLOW, SweepStart(), id=sweep_schedule_id(queue), task_queue=queue),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=settings.store.sweep_interval)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )
    try:
        try:
            await client.create_schedule(sweep_schedule_id(queue), schedule)
        except ScheduleAlreadyRunningError:
            # It exists: its interval follows DSMO_RETENTION_SWEEP_EVERY; a pause an operator set stays.
            handle = client.get_schedule_handle(sweep_schedule_id(queue))
            await handle.update(
                lambda found: ScheduleUpdate(
                    schedule=dataclasses.replace(schedule, state=found.description.schedule.state)
                )
            )
            return
    except RPCError as err:
        # A server without schedules, or a key that may not create one: the worker serves all the same.
        log.warning("retention sweep not scheduled on %s: %s (ended runs are kept)", queue, err.message)
        return
    log.info("retention sweep scheduled every %s on %s", settings.store.sweep_every, queue)


async def set_namespace_retention(client: Client, period: timedelta) -> None:
    """Set how long the namespace keeps ended runs' histories (the embedded stack's, at `dsmo dev up`)."""
    await client.workflow_service.update_namespace(
        UpdateNamespaceRequest(
            namespace=client.namespace,
            config=NamespaceConfig(workflow_execution_retention_ttl=Duration(seconds=int(period.total_seconds()))),
        )
    )
