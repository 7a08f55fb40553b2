"""DSMO's side of the tools study: the support agent run on a worker in this process.

The worker is built as the tool-loop tests build theirs (`build_worker` with the lookup as a
plugin action and the stub model as its endpoint), with the artifact cache `dsmo worker` has, on
the bench's stack. One short run warms it
(workflow code loaded, connections opened); the measured run follows. CPU is counted per
process: this one (the client and the worker), the Temporal server and the S3 store, found by
the ports they listen on (`bench.cpu`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from bench.cpu import CpuMeter
from bench.studies.tools.agent import TICKET, WARM_UP_TURNS, Orders, script, support
from bench.studies.tools.model import StubModel
from dsmo.activities.actions import ActionRegistry, FunctionAction
from dsmo.activities.llm_stage import LlmEndpoint
from dsmo.activities.messaging import FileChannel
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.runtime.storage import artifact_store
from dsmo.worker import build_worker
from dsmo.workflows.definition.model import AgentDefinition


async def _one_run(dsmo: DsmoClient, queue: str, definition: AgentDefinition) -> tuple[str, float]:
    """Start a run and wait for it; (its id, its wall seconds). Raises if it did not answer."""
    began = time.perf_counter()
    run_id = (await dsmo.start(definition, TICKET, task_queue=queue)).run_id
    result = await dsmo.result(run_id)
    wall = time.perf_counter() - began
    if result.status.value != "completed" or "answer" not in (result.path or []):
        raise RuntimeError(f"tools study: DSMO run {run_id} ended {result.status.value}: {result.error_message}")
    return run_id, wall


async def _history(dsmo: DsmoClient, run_id: str) -> tuple[int, int]:
    """(events, bytes) of the run's Temporal history: what the engine keeps of it."""
    handle = dsmo.temporal.get_workflow_handle(run_id)
    events = len((await handle.fetch_history()).events)
    described = await handle.describe()
    return events, int(described.raw_description.workflow_execution_info.history_size_bytes)


async def dsmo_side(settings: Settings, model: StubModel, turns: int) -> dict[str, Any]:
    """One measured run of the support agent with ``turns`` lookups on DSMO.

    Args:
        settings: the bench's stack.
        model: the stub model, shared with the other contender.
        turns: the lookups the model asks for before it answers.

    Returns:
        The run's totals: ``turns`` (lookups made), ``model_calls``, ``wall_s``, ``cpu_s`` by
        process (``process``, ``server``: Temporal, ``store``: S3) and ``state`` (history event
        ``records`` and ``bytes``).
    """
    dsmo = await DsmoClient.connect(settings)
    orders = Orders()
    actions = ActionRegistry()
    actions.add(FunctionAction("lookup-order", orders.lookup))
    actions.add(FunctionAction("refund-order", orders.refund))
    queue = f"bench-tools-{uuid.uuid4().hex[:8]}"
    worker = build_worker(
        dsmo.temporal,
        task_queue=queue,
        store=artifact_store(settings, cache=True),  # as `dsmo worker` builds its store
        channel=FileChannel(settings.state_dir / "bench-tools-outbox"),
        actions=actions,
        llm=LlmEndpoint(model.url, default_model="local-chat-1"),
        sandboxed=settings.worker.sandbox,
    )
    async with worker:
        model.script(script(WARM_UP_TURNS))
        await _one_run(dsmo, queue, support(WARM_UP_TURNS))
        definition = support(turns)
        model.script(script(turns))
        orders.lookups = 0
        meter = CpuMeter.for_stack(settings)
        before = meter.sample()
        run_id, wall = await _one_run(dsmo, queue, definition)
        after = meter.sample()
    events, size = await _history(dsmo, run_id)
    roles = {"python": "process", "temporal": "server", "s3": "store"}
    return {
        "run_id": run_id,
        "turns": orders.lookups,
        "model_calls": model.calls(),
        "wall_s": wall,
        "cpu_s": {roles[role]: after[role] - before[role] for role in before if role in after},
        "state": {"what": "history events", "records": events, "bytes": size},
    }
