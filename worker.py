"""The DSMO worker: the AgentExecution workflow plus every activity, wired to real clients.

Run it as `python -m dsmo.worker` or `dsmo worker`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import temporalio.activity
from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner

from dsmo.activities.actions import ActionActivities, ActionRegistry
from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.audit_log import AuditActivities
from dsmo.activities.definitions import DefinitionActivities, DefinitionStore
from dsmo.activities.limiter import LimiterActivities
from dsmo.activities.messaging import Channel, FileChannel, MessagingActivities, WebhookChannel
from dsmo.activities.orders.actions import order_actions
from dsmo.activities.orders.db import OrderDatabase
from dsmo.activities.processors import ProcessorRegistry, default_registry
from dsmo.activities.stage import StageActivities
from dsmo.starter import worker_logging
from dsmo.starter.client.dsmo_client import connect_temporal
from dsmo.starter.devstack.checks import ensure_bucket
from dsmo.starter.exits import hard_exit
from dsmo.starter.settings import Settings, workflow_sandbox_from
from dsmo.starter.storage import artifact_store
from dsmo.starter.telemetry import metrics_runtime, setup_tracing
from dsmo.workflows.compensation import CompensationRetry
from dsmo.workflows.execution import AgentExecution
from dsmo.workflows.limiter import AgentRateLimiter
from dsmo.workflows.sandbox import sandbox_runner

log = logging.getLogger("dsmo.worker")


def build_worker(
    client: Client,
    *,
    task_queue: str,
    store: ArtifactStore,
    channel: Channel | None = None,
    channels: Mapping[str, Channel] | None = None,
    default_channel: str = "file",
    registry: ProcessorRegistry = default_registry,
    max_cached_workflows: int | None = None,
    activity_threads: int = 16,
    overrides: Sequence[Callable[..., Any]] = (),
    actions: ActionRegistry | None = None,
    workflow_runner: WorkflowRunner | None = None,
    sandboxed: bool | None = None,
    extra_workflows: Sequence[type] = (),
) -> Worker:
    """One worker for the workflows and all activities; tests build theirs the same way.

    ``sandboxed`` (default: ``DSMO_WORKFLOW_SANDBOX``) runs the workflows in Temporal's sandbox.
    ``extra_workflows`` are served beside DSMO's own on the same task queue.
    """
    stages = StageActivities(store, registry)
    every_channel = dict(channels or {})
    if channel is not None:
        every_channel.setdefault(channel.name, channel)
        default_channel = channel.name if channels is None else default_channel
    messaging = MessagingActivities(every_channel, default_channel)
    definitions = DefinitionActivities(DefinitionStore(store))
    audit = AuditActivities(store)
    side_effects = ActionActivities(actions or ActionRegistry())
    limiter = LimiterActivities(client, task_queue)
    extra: dict[str, Any] = {} if max_cached_workflows is None else {"max_cached_workflows": max_cached_workflows}
    extra["workflow_runner"] = workflow_runner or workflow_runner_for(
        workflow_sandbox_from(os.environ) if sandboxed is None else sandboxed
    )
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentExecution, AgentRateLimiter, CompensationRetry, *extra_workflows],
        activities=_with_overrides(
            [
                stages.prepare_run,
                stages.run_stage,
                stages.write_dead_letter,
                audit.export_audit,
                messaging.send_message,
                messaging.send_request,
                definitions.resolve_definition,
                limiter.request_slot,
                limiter.release_slot,
                side_effects.invoke_action,
                side_effects.compensate_action,
            ],
            overrides,
        ),
        # boto3 is synchronous: activities run on threads, the workflow loop stays free.
        activity_executor=concurrent.futures.ThreadPoolExecutor(max_workers=activity_threads),
        max_concurrent_activities=activity_threads,
        **extra,
    )


def workflow_runner_for(sandboxed: bool) -> WorkflowRunner:
    """Temporal's sandbox, or none.

    DSMO's workflow code is fixed (definitions are data, agents are activities) and deterministic
    by construction: tests/unit/test_determinism.py checks it statically, the suite runs it inside
    the sandbox, and golden histories and every bench run are replayed. The sandbox's runtime
    guard then costs more than it finds in production: ~10 ms of worker CPU per three-stage run
    (a serialization-context lookup through the sandbox per payload), measured by `make bench`.
    """
    if not sandboxed:
        return UnsandboxedWorkflowRunner()
    return sandbox_runner()


def _with_overrides(
    defaults: list[Callable[..., Any]], overrides: Sequence[Callable[..., Any]]
) -> list[Callable[..., Any]]:
    """Activities in ``overrides`` replace the default of the same name (how tests inject faults)."""
    names = {_activity_name(fn) for fn in overrides}
    return [fn for fn in defaults if _activity_name(fn) not in names] + list(overrides)


def _activity_name(fn: Callable[..., Any]) -> str:
    definition = temporalio.activity._Definition.must_from_callable(fn)
    return str(definition.name)


def configured_registry(settings: Settings) -> ProcessorRegistry:
    """The example agents, plus the LLM processor when an OpenAI-compatible endpoint is configured."""
    from dsmo.activities import agents as _agents  # noqa: F401 - registers the example processors

    if settings.llm_base_url:
        from dsmo.activities.agents import llm

        default_registry.register(
            llm.NAME, llm.VERSION, description=llm.DESCRIPTION, input_model=llm.LlmInput, summary_model=llm.LlmSummary
        )(llm.LlmProcessor(settings.llm_base_url, settings.llm_model, settings.llm_api_key))
    return default_registry


def _metrics_runtime(settings: Settings) -> Runtime | None:
    if not settings.metrics_bind:
        return None
    try:
        runtime = metrics_runtime(settings.metrics_bind)
    except Exception as err:  # noqa: BLE001 - metrics must not stop the worker
        log.warning("metrics endpoint %s not started: %s", settings.metrics_bind, err)
        return None
    log.info("Prometheus metrics on http://%s/metrics", settings.metrics_bind)
    return runtime


async def run_worker(settings: Settings, *, extra_workflows: Sequence[type] = ()) -> None:
    setup_tracing("dsmo-worker")
    client = await connect_temporal(settings, runtime=_metrics_runtime(settings))
    await asyncio.to_thread(ensure_bucket, settings)
    store = artifact_store(settings, cache=True)
    channels: dict[str, Channel] = {"file": FileChannel(settings.outbox_dir, log_content=settings.log_content)}
    if settings.webhook_url:
        channels["webhook"] = WebhookChannel(settings.webhook_url, token=settings.webhook_token or None)
    worker = build_worker(
        client,
        task_queue=settings.task_queue,
        store=store,
        channels=channels,
        default_channel=settings.channel,
        registry=configured_registry(settings),
        actions=order_actions(OrderDatabase(settings.orders_db_url)),
        sandboxed=settings.workflow_sandbox,
        extra_workflows=extra_workflows,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info(
        "worker polling %s on %s (namespace %s), artifacts in s3://%s",
        settings.task_queue,
        settings.temporal_address,
        settings.temporal_namespace,
        settings.artifact_bucket,
    )
    async with worker:
        await stop.wait()
    log.info("worker stopped")


def main(*, extra_workflows: Sequence[type] = ()) -> None:
    # Lock-free logging: a workflow task interrupted by the deadlock detector cannot leave a
    # handler lock held and stall the whole worker (see starter/worker_logging.py).
    worker_logging.install(logging.INFO)
    asyncio.run(run_worker(Settings.from_env(), extra_workflows=extra_workflows))
    hard_exit(0)


if __name__ == "__main__":
    main()
