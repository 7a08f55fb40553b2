"""The DSMO worker: the AgentExecution workflow plus every activity, wired to real clients.

Run it as `dsmo worker [--load MODULE ...]` or `python -m dsmo.worker`. At start it imports its
plugins (the `dsmo.plugins` entry points, `DSMO_LOAD` and `--load`), serves the agents, actions
and channels they registered, and writes that catalog (with its MCP servers' tools) to the store.

Longer than most modules: `build_worker` wires every workflow and activity to its clients, and
that wiring reads best in one place.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import logging
import os
import signal
import socket
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import temporalio.activity
from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner

from dsmo.activities import catalog_publishing as catalog
from dsmo.activities.actions import ActionActivities, ActionRegistry
from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.audit_log import AuditActivities
from dsmo.activities.definition_store import DefinitionActivities, DefinitionStore
from dsmo.activities.hand_on import HandOnActivities
from dsmo.activities.hook_activities import HookActivities
from dsmo.activities.limiter_signals import LimiterActivities
from dsmo.activities.llm_stage import LlmEndpoint, LlmStage
from dsmo.activities.maybe_async import loop_watch
from dsmo.activities.mcp_calls import McpServers
from dsmo.activities.messaging import Channel, FileChannel, MessagingActivities
from dsmo.activities.plugin_errors import PluginError
from dsmo.activities.plugin_loading import load_plugins, split_modules
from dsmo.activities.plugins import default_actions, default_channels
from dsmo.activities.processors import ProcessorRegistry, default_registry
from dsmo.activities.retention_sweeping import RetentionActivities
from dsmo.activities.round_trip import hand_over_round_trip
from dsmo.activities.stage import StageActivities
from dsmo.activities.tool_calls import ToolActivities
from dsmo.client.connection import connect_temporal
from dsmo.config.settings import Settings, SettingsError, workflow_sandbox_from
from dsmo.runtime import logging_setup as worker_logging
from dsmo.runtime.exits import hard_exit
from dsmo.runtime.heap import freeze_startup_heap
from dsmo.runtime.provisioning import StackError, ensure_bucket, ensure_sweep_schedule, ensure_worker_search_attributes
from dsmo.runtime.storage import artifact_store
from dsmo.runtime.telemetry import metrics_runtime, setup_tracing
from dsmo.workflows.common.sandbox import sandbox_runner
from dsmo.workflows.engine.agent_execution import AgentExecution
from dsmo.workflows.flow.flow_workflows import FLOW_WORKFLOWS
from dsmo.workflows.lifecycle.hook_workflows import HOOK_WORKFLOWS
from dsmo.workflows.lifecycle.retention_sweep import RetentionSweep
from dsmo.workflows.saga.compensation_retry import CompensationRetry

log = logging.getLogger("dsmo.worker")
SERVED_WORKFLOWS = (AgentExecution, *FLOW_WORKFLOWS, CompensationRetry, RetentionSweep, *HOOK_WORKFLOWS)

# Workflow tasks a worker holds at once: Temporal's default. Python runs one activation at a time,
# so fewer would shorten a task's wait inside a busy worker (W5's stage: ~0.10 s at 8, ~0.12 s at
# 100), but the worker then idles while completions travel: W4 fell from 0.66-0.74x to 0.63x at 8.
WORKFLOW_TASK_SLOTS = 100


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
    max_concurrent_activities: int | None = None,
    max_concurrent_workflow_tasks: int = WORKFLOW_TASK_SLOTS,
    overrides: Sequence[Callable[..., Any]] = (),
    actions: ActionRegistry | None = None,
    workflow_runner: WorkflowRunner | None = None,
    sandboxed: bool | None = None,
    extra_workflows: Sequence[type] = (),
    settings: Settings | None = None,
    identity: str | None = None,
    llm: LlmEndpoint | None = None,
    mcp_servers: McpServers | None = None,
) -> Worker:
    """One worker for the workflows and all activities; tests build theirs the same way.

    ``activity_threads`` run plain processors and the synchronous activities;
    ``max_concurrent_activities`` (default: as many) bounds what the worker takes at once,
    async processors included. ``max_concurrent_workflow_tasks`` bounds the workflow tasks it
    holds at once (see `WORKFLOW_TASK_SLOTS`). ``sandboxed`` (default:
    ``DSMO_WORKFLOW_SANDBOX``) runs the workflows in Temporal's sandbox. ``extra_workflows``
    are served beside DSMO's own on the same task queue. ``settings`` reach actions through
    their context. ``llm`` is where `llm` stages send their calls (default: the settings'
    endpoint; none without settings). ``mcp_servers`` are the MCP servers tools may name
    (default: the settings' ``DSMO_MCP_SERVERS``).
    """
    threads = concurrent.futures.ThreadPoolExecutor(max_workers=activity_threads, thread_name_prefix="dsmo-activity")
    endpoint = llm or (llm_endpoint(settings) if settings is not None else LlmEndpoint(""))
    stages = StageActivities(store, registry, executor=threads, llm=LlmStage(endpoint, store))
    every_channel = dict(channels or {})
    if channel is not None:
        name = str(getattr(channel, "name", "file"))
        every_channel.setdefault(name, channel)
        default_channel = name if channels is None else default_channel
    messaging = MessagingActivities(every_channel, default_channel)
    definitions = DefinitionActivities(DefinitionStore(store))
    audit = AuditActivities(store, retention_defaults=settings.store.retention if settings else None)
    outboxes = [found.outbox for found in every_channel.values() if isinstance(found, FileChannel)]
    retention = RetentionActivities(store, client, outboxes=outboxes)
    hooks = HookActivities(store, client, task_queue, (settings or Settings.from_env()).worker.hooks_allow_private)
    side_effects = ActionActivities(default_actions if actions is None else actions, threads, settings)
    servers = mcp_servers if mcp_servers is not None else (settings.llm.mcp if settings is not None else {})
    tools = ToolActivities(side_effects.registry, store, threads, settings, servers)
    limiter = LimiterActivities(client, task_queue, (settings or Settings.from_env()).worker.slot_holder_check_seconds)
    extra: dict[str, Any] = {"identity": identity} if identity else {}
    extra.update({} if max_cached_workflows is None else {"max_cached_workflows": max_cached_workflows})
    extra["workflow_runner"] = workflow_runner or workflow_runner_for(
        workflow_sandbox_from(os.environ) if sandboxed is None else sandboxed
    )
    with warnings.catch_warnings():
        # More activities than threads is the point: async ones (llm stages) hold no thread while waiting.
        warnings.filterwarnings("ignore", message="Worker max_concurrent_activities is", category=UserWarning)
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=[*SERVED_WORKFLOWS, *extra_workflows],
            activities=_with_overrides(
                [
                    stages.prepare_run,
                    stages.subject_key,
                    stages.run_stage,
                    stages.write_dead_letter,
                    audit.export_audit,
                    audit.write_audit_segment,
                    audit.store_event_values,
                    hand_over_round_trip,
                    retention.sweep_retention,
                    retention.record_sweep,
                    messaging.send_message,
                    messaging.send_request,
                    definitions.resolve_definition,
                    limiter.request_slot,
                    limiter.release_slot,
                    limiter.check_holders,
                    limiter.request_token,
                    HandOnActivities(client, store, task_queue).hand_on_deliveries,
                    side_effects.invoke_action,
                    side_effects.compensate_action,
                    tools.run_tool,
                    *hooks.activities(),
                ],
                overrides,
            ),
            # boto3 is synchronous: activities run on threads, the workflow loop stays free.
            activity_executor=threads,
            max_concurrent_activities=max_concurrent_activities or activity_threads,
            max_concurrent_workflow_tasks=max_concurrent_workflow_tasks,
            **extra,
        )
    return worker


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


def llm_endpoint(settings: Settings) -> LlmEndpoint:
    """The endpoint `llm` stages call, from ``DSMO_LLM_*``."""
    llm = settings.llm
    return LlmEndpoint(llm.base_url, llm.api_key, llm.model, llm.aliases, llm.max_response_bytes, llm.price_table)


def load_worker_plugins(settings: Settings, modules: Sequence[str] = ()) -> list[str]:
    """Import the worker's plugins: entry points, then ``DSMO_LOAD``, then ``modules``.

    Named modules are found in the current directory first, as `python -m` would.

    Raises:
        PluginError: One line naming the plugin and what is wrong.
    """
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return load_plugins([*split_modules(settings.worker.load), *modules])


def metrics_runtime_of(settings: Settings) -> Runtime | None:
    """The Prometheus runtime the settings ask for, or None (a failure to start one is logged, not fatal)."""
    if not settings.worker.metrics_bind:
        return None
    try:
        runtime = metrics_runtime(settings.worker.metrics_bind)
    except Exception as err:  # noqa: BLE001 - metrics must not stop the worker
        log.warning("metrics endpoint %s not started: %s", settings.worker.metrics_bind, err)
        return None
    log.info("Prometheus metrics on http://%s/metrics", settings.worker.metrics_bind)
    return runtime


async def run_worker(settings: Settings, *, extra_workflows: Sequence[type] = ()) -> None:
    """Serve the task queue until SIGINT or SIGTERM; the plugins must be loaded already."""
    channels: dict[str, Channel] = default_channels.build(settings)
    default_channel = settings.messaging.channel
    if default_channel not in channels:
        offered = ", ".join(channels) or "none"
        raise PluginError(f"DSMO_CHANNEL: channel {default_channel!r} is not offered by any plugin ({offered})")
    setup_tracing("dsmo-worker")
    runtime = metrics_runtime_of(settings)
    client = await connect_temporal(settings, runtime=runtime)
    await asyncio.to_thread(ensure_bucket, settings)
    await ensure_worker_search_attributes(client)
    await ensure_sweep_schedule(client, settings)
    store = artifact_store(settings, cache=True)
    identity = f"{os.getpid()}@{socket.gethostname()}"
    worker = build_worker(
        client,
        task_queue=settings.temporal.task_queue,
        store=store,
        channels=channels,
        default_channel=default_channel,
        registry=default_registry,
        actions=default_actions,
        activity_threads=settings.worker.processor_threads,
        max_concurrent_activities=settings.worker.max_concurrent_activities,
        max_concurrent_workflow_tasks=settings.worker.max_concurrent_workflow_tasks,
        max_cached_workflows=settings.worker.max_cached_workflows,
        sandboxed=settings.worker.sandbox,
        extra_workflows=extra_workflows,
        settings=settings,
        identity=identity,
    )
    offer, queue = catalog.describe(default_registry, default_actions, channels), settings.temporal.task_queue
    publishing = await catalog.published(store, queue, identity, offer, settings.llm.mcp)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    where = settings.temporal
    log.info(
        "worker polling %s on %s (namespace %s), artifacts in s3://%s",
        *(where.task_queue, where.address, where.namespace, settings.store.bucket),
    )
    log.info("%d objects from start-up kept out of garbage collection", freeze_startup_heap())
    # Names any async agent or action that blocks the loop every run on this worker shares.
    watching = asyncio.create_task(loop_watch.monitor((runtime or Runtime.default()).metric_meter))
    try:
        async with worker:
            await stop.wait()
    finally:
        for task in (watching, publishing):
            task.cancel()
    log.info("worker stopped")


def main(*, extra_workflows: Sequence[type] = (), load: Sequence[str] = ()) -> None:
    """Load the plugins and run the worker; a plugin error is one line on stderr and exit code 2.

    Args:
        extra_workflows: Workflows served beside DSMO's own (the benchmark's).
        load: Plugin modules to import besides the entry points and ``DSMO_LOAD``.
    """
    try:
        settings = Settings.from_env()
    except SettingsError as err:
        print(f"dsmo worker: {err}", file=sys.stderr)
        hard_exit(2)
    # Lock-free logging: a workflow task interrupted by the deadlock detector cannot leave a
    # handler lock held and stall the whole worker (see dsmo/runtime/logging_setup.py).
    worker_logging.install(logging.getLevelNamesMapping()[settings.worker.log_level.upper()])
    try:
        loaded = load_worker_plugins(settings, load)
        log.info("plugins: %s", ", ".join(loaded) or "none")
        asyncio.run(run_worker(settings, extra_workflows=extra_workflows))
    except (PluginError, StackError) as err:
        print(f"dsmo worker: {err}", file=sys.stderr)
        hard_exit(2)
    hard_exit(0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m dsmo.worker", description="Run a DSMO worker.")
    parser.add_argument("--load", action="append", default=[], metavar="MODULE", help="a plugin module (repeatable)")
    main(load=parser.parse_args().load)
