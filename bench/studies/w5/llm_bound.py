"""W5, LLM-bound: three-stage runs whose middle stage waits ~1 s on a model, 200 at once on one
worker, with the model call made two ways, an `llm` stage (async, on the worker's event loop) and
a plain agent making the same call on the processor threads, beside two references without
DSMO: raw Temporal running the same shape, alone and with the two store writes an `llm` stage
makes (`bench.studies.w5.llm_floor`).

The model is `bench/llm_server.py` in its own process, answering every call after the same
latency. Every contender's timings come from Temporal's history: the model stage from scheduled
to completed (queueing for a worker slot or a thread included). Each contender runs several
batches, alternated with the others'; the contenders that can hold every call at once also run
a held batch, where the model answers nothing until all calls are in flight. The arithmetic and
the report are in `bench.studies.w5.w5_report`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from bench.paths import REPO
from bench.studies.w5 import llm_floor
from bench.studies.w5.w5_report import held_figures, pooled
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.devstack.stack import free_port_block
from dsmo.runtime.provisioning import worker_polling
from dsmo.workflows.definition.model import AgentDefinition, parse_definition

ANSWER = json.dumps({"category": "billing", "confidence": 0.9})
ASYNC, THREAD_POOL = "async (llm stage)", "thread pool (plain agent)"
RAW, RAW_WRITES = "raw Temporal", "raw Temporal + the writes"
BATCH_LIMIT_SECONDS = 600


@dataclass(frozen=True)
class Contender:
    """One way of making W5's model call: which worker runs it and how it is configured."""

    name: str
    worker: tuple[str, ...]  # the module and arguments after `python -m`
    env: dict[str, str]
    dsmo: bool = True  # DSMO runs of `definition(name)`, or the reference workflow
    holds_all: bool = True  # can have every call of a batch in flight at once


# W5's definitions run the example agent text-extract: its workers load DSMO's examples.
EXAMPLES = "dsmo_examples"
CONTENDERS = (
    # Every call of a batch accepted at once, the I/O threads as many as the reference's.
    Contender(
        ASYNC,
        ("dsmo.worker",),
        {"DSMO_MAX_CONCURRENT_ACTIVITIES": "256", "DSMO_PROCESSOR_THREADS": "32", "DSMO_LOAD": EXAMPLES},
    ),
    # The defaults, where accepted work equals threads (see docs/plugins.md).
    Contender(THREAD_POOL, ("dsmo.worker",), {"DSMO_LOAD": f"{EXAMPLES},bench.studies.w5.llm_agents"}, holds_all=False),
    Contender(RAW, ("bench.studies.w5.llm_floor",), {}, dsmo=False),
    Contender(RAW_WRITES, ("bench.studies.w5.llm_floor", "--writes"), {}, dsmo=False),
)


def definition(mode: str) -> AgentDefinition:
    if mode == ASYNC:
        middle: dict[str, Any] = {
            "actionType": "llm",
            "prompt": "Classify: {{input.text}}",
            "outputSchema": {"type": "object", "required": ["category"]},
        }
    else:
        middle = {"actionType": "run_agent", "agent": "llm-blocking"}
    return parse_definition(
        {
            "agent": "bench-w5",
            "start": "extract",
            "nodes": {
                "extract": {"actionType": "run_agent", "agent": "text-extract", "next": "gate"},
                # Every run waits here until all have started, so the model calls go out together.
                "gate": {"actionType": "wait_for_response", "next": "classify"},
                "classify": {**middle, "timeout": "120s", "next": "finish"},
                "finish": {"actionType": "run_agent", "agent": "text-extract"},
            },
        }
    )


def _server(url: str, path: str, method: str = "GET") -> dict[str, Any]:
    request = urllib.request.Request(
        url.removesuffix("/v1") + path, method=method, data=b"" if method == "POST" else None
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


async def _until_up(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            await asyncio.to_thread(_server, url, "/stats")
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the chat server did not start") from None
            await asyncio.sleep(0.1)


async def _go(dsmo: DsmoClient, run_id: str) -> None:
    # A signal, as an outside system sends it: no round trip through the worker.
    await dsmo.temporal.get_workflow_handle(run_id).signal("MESSAGE_RECEIVED", {"event_id": "go", "text": "go"})


async def _start(dsmo: DsmoClient, graph: AgentDefinition | None, queue: str, index: int) -> str:
    """Start one run: of ``graph`` on DSMO, or of the reference workflow when there is none."""
    text = f"invoice {index} is wrong"
    if graph is not None:
        return (await dsmo.start(graph, {"text": text}, task_queue=queue)).run_id
    run_id = f"bench-w5-floor-{uuid.uuid4().hex[:12]}"
    await dsmo.temporal.start_workflow(llm_floor.WORKFLOW, text, id=run_id, task_queue=queue)
    return run_id


async def _count(dsmo: DsmoClient, query: str) -> int:
    return (await dsmo.temporal.count_workflows(query)).count


async def _until_counted(dsmo: DsmoClient, query: str, runs: int, what: str, deadline: float) -> None:
    # Visibility counts: one cheap request per half second, instead of a client per run
    # watching it (which would take CPU from the runs it measures).
    while await _count(dsmo, query) < runs:
        if time.monotonic() > deadline:
            raise RuntimeError(f"W5: the runs were not {what} within the batch's time limit")
        await asyncio.sleep(0.5)


def model_stage_timings(events: Sequence[HistoryEvent]) -> tuple[float, float, float, float]:
    """From a run's history: when its model stage was scheduled, started and completed, and the run's end.

    The model stage is the first activity scheduled after the go signal; every contender's times
    come from Temporal's own history, so they are measured alike.

    Raises:
        ValueError: The history has no go signal, or no model stage that started and completed.
    """
    kinds = [event.event_type for event in events]
    if EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED not in kinds:
        raise ValueError("no go signal")
    after = kinds.index(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    scheduled = next((e for e in events[after:] if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), None)
    if scheduled is None:
        raise ValueError("no model stage scheduled after the go signal")
    of_stage = {event.event_type: event for event in events if _stage_of(event) == scheduled.event_id}
    if len(of_stage) < 2:
        raise ValueError("the model stage did not complete")
    return (
        _seconds(scheduled),
        _seconds(of_stage[EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]),
        _seconds(of_stage[EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]),
        _seconds(events[-1]),
    )


def _stage_of(event: HistoryEvent) -> int | None:
    """The scheduling event's id of an activity's start or completion; None for other events."""
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
        return event.activity_task_started_event_attributes.scheduled_event_id
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        return event.activity_task_completed_event_attributes.scheduled_event_id
    return None


def _seconds(event: HistoryEvent) -> float:
    return event.event_time.ToDatetime(tzinfo=UTC).timestamp()


async def _timings(dsmo: DsmoClient, run_id: str) -> tuple[float, float, float, float]:
    events = (await dsmo.temporal.get_workflow_handle(run_id).fetch_history()).events
    try:
        return model_stage_timings(events)
    except ValueError as err:
        ended = EventType.Name(events[-1].event_type) if events else "nothing"
        raise RuntimeError(f"W5: run {run_id}: {err} (its history ends with {ended})") from None


async def _one_batch(
    settings: Settings, dsmo: DsmoClient, url: str, contender: Contender, runs: int, *, held: bool = False
) -> dict[str, Any]:
    """One batch of ``runs`` on a fresh worker: each model stage's timings and the batch's own figures.

    ``held``: the model answers no call until all ``runs`` are in flight, then each after the latency.
    """
    queue = f"bench-w5-{uuid.uuid4().hex[:6]}"
    env = {
        **os.environ,
        **settings.to_env(),
        "DSMO_TASK_QUEUE": queue,
        "DSMO_METRICS_BIND": "off",
        "DSMO_LLM_BASE_URL": url,
        **contender.env,
    }
    log = tempfile.NamedTemporaryFile(prefix="dsmo-w5-worker-", suffix=".log", delete=False)  # noqa: SIM115
    worker = subprocess.Popen(
        [sys.executable, "-m", *contender.worker], env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT
    )
    in_queue = f"TaskQueue = '{queue}'"
    try:
        deadline = time.monotonic() + 60
        while not await worker_polling(settings.with_changes(temporal={"task_queue": queue}), worker.pid):
            if worker.poll() is not None or time.monotonic() > deadline:
                tail = Path(log.name).read_text()[-1500:]
                raise RuntimeError(f"W5 {contender.name}: the worker did not start; its log ends:\n{tail}")
            await asyncio.sleep(0.2)
        await asyncio.to_thread(_server, url, "/reset", "POST")
        if held:
            await asyncio.to_thread(_server, url, f"/hold?until={runs}", "POST")
        graph = definition(contender.name) if contender.dsmo else None
        run_ids = await asyncio.gather(*(_start(dsmo, graph, queue, index) for index in range(runs)))
        deadline = time.monotonic() + BATCH_LIMIT_SECONDS
        await _until_counted(dsmo, f"{in_queue} AND WaitingFor = 'response'", runs, "at the gate", deadline)
        began = time.time()
        await asyncio.gather(*(_go(dsmo, run_id) for run_id in run_ids))
        await _until_counted(dsmo, f"{in_queue} AND ExecutionStatus != 'Running'", runs, "ended", deadline)
        completed = await _count(dsmo, f"{in_queue} AND ExecutionStatus = 'Completed'")
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    stats = await asyncio.to_thread(_server, url, "/stats")
    timings = [await _timings(dsmo, run_id) for run_id in run_ids]
    return {
        "completed": completed,
        "wall_seconds": round(max(ended for *_, ended in timings) - began, 2),
        "model_calls": stats["requests"],
        "peak_in_flight": stats["peakInFlight"],
        "residence": [done - scheduled for scheduled, _, done, _ in timings],
        "dispatch": [started - scheduled for scheduled, started, _, _ in timings],
        "scheduled": [scheduled for scheduled, *_ in timings],
        "commits": [done for _, _, done, _ in timings],
        "released_at": stats.get("releasedAt"),
    }


async def w5(
    settings: Settings, dsmo: DsmoClient, *, runs: int = 200, latency: float = 1.0, batches: int = 3
) -> dict[str, Any]:
    """Every contender against one chat server, in alternating batches; the figures per contender."""
    port = free_port_block(1)
    url = f"http://127.0.0.1:{port}/v1"
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.llm_server", "--port", str(port), "--latency", str(latency), "--content", ANSWER],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    measured: dict[str, list[dict[str, Any]]] = {contender.name: [] for contender in CONTENDERS}
    held: dict[str, dict[str, Any]] = {}
    try:
        await _until_up(url, server)
        # Alternated, so every contender meets the same drift in the shared stack (its history grows).
        for batch in range(batches):
            for contender in CONTENDERS:
                print(f"W5: batch {batch + 1} of {batches}, {runs} runs, {contender.name}", flush=True)
                measured[contender.name].append(await _one_batch(settings, dsmo, url, contender, runs))
        # The thread pool cannot hold every call at once (it has 16 threads); the others can.
        for contender in CONTENDERS:
            if contender.holds_all:
                print(f"W5: {runs} runs, {contender.name}, all {runs} calls held in flight together", flush=True)
                found = await _one_batch(settings, dsmo, url, contender, runs, held=True)
                held[contender.name] = held_figures(found, runs, latency, mode=contender.name)
    finally:
        server.terminate()
        server.wait(timeout=10)
    modes = {name: pooled(found, runs, latency) for name, found in measured.items()}
    return {"runs": runs, "batches": batches, "latency_seconds": latency, "modes": modes, "held": held}
