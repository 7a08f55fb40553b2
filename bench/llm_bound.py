"""W5, LLM-bound: three-stage runs whose middle stage waits ~1 s on a model, 200 at once on one
worker, with the model call made two ways: an `llm` stage (async, on the worker's event loop) and
a plain agent making the same call on the processor threads.

The model is `bench/llm_server.py` in its own process, answering every call after the same
latency. The ideal is the model's own bound: with C calls in flight and latency L, C/L calls per
second. The middle stage's throughput follows from Little's law, C divided by the mean time a
stage spends from being scheduled to being committed (queueing for a worker slot or a thread
included), so its ratio to the ideal is L over that mean. Each contender runs several batches,
alternated with the other's; a batch's wall time and the peak number of calls the server saw in
flight are reported beside it. The arithmetic and the report are in `bench.w5_report`.
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
from pathlib import Path
from typing import Any

from bench.w5_report import held_figures, pooled
from dsmo.starter.client.dsmo_client import DsmoClient
from dsmo.starter.devstack.checks import worker_polling
from dsmo.starter.devstack.stack import free_port_block
from dsmo.starter.settings import Settings
from dsmo.workflows.definition import AgentDefinition, parse_definition
from dsmo.workflows.status import RunStatus

REPO = Path(__file__).resolve().parent.parent
ANSWER = json.dumps({"category": "billing", "confidence": 0.9})
# How each contender's worker is configured: the async one accepts the 200 calls; the thread
# pool one keeps the defaults, where accepted work equals threads (see docs/plugins.md).
ASYNC = "async (llm stage)"
MODES: dict[str, dict[str, str]] = {
    ASYNC: {"DSMO_MAX_CONCURRENT_ACTIVITIES": "256", "DSMO_PROCESSOR_THREADS": "32"},
    "thread pool (plain agent)": {"DSMO_LOAD": "bench.llm_agents"},
}


def definition(mode: str) -> AgentDefinition:
    if mode.startswith("async"):
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


async def _one_batch(
    settings: Settings, dsmo: DsmoClient, url: str, mode: str, runs: int, *, held: bool = False
) -> dict[str, Any]:
    """One batch of ``runs`` on a fresh worker: each classify stage's timings and the batch's own figures.

    ``held``: the model answers no call until all ``runs`` are in flight, then each after the latency.
    """
    queue = f"bench-w5-{uuid.uuid4().hex[:6]}"
    env = {
        **os.environ,
        **settings.to_env(),
        "DSMO_TASK_QUEUE": queue,
        "DSMO_METRICS_BIND": "off",
        "DSMO_LLM_BASE_URL": url,
        **MODES[mode],
    }
    log = tempfile.NamedTemporaryFile(prefix="dsmo-w5-worker-", suffix=".log", delete=False)  # noqa: SIM115
    worker = subprocess.Popen(
        [sys.executable, "-m", "dsmo.worker"], env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        while not await worker_polling(settings.with_changes(task_queue=queue), worker.pid):
            if worker.poll() is not None or time.monotonic() > deadline:
                tail = Path(log.name).read_text()[-1500:]
                raise RuntimeError(f"W5 {mode}: the worker did not start; its log ends:\n{tail}")
            await asyncio.sleep(0.2)
        await asyncio.to_thread(_server, url, "/reset", "POST")
        if held:
            await asyncio.to_thread(_server, url, f"/hold?until={runs}", "POST")
        graph = definition(mode)
        run_ids = await asyncio.gather(
            *(dsmo.start(graph, {"text": f"invoice {index} is wrong"}, task_queue=queue) for index in range(runs))
        )
        while (await dsmo.temporal.count_workflows(f"TaskQueue = '{queue}' AND WaitingFor = 'response'")).count < runs:
            await asyncio.sleep(0.5)
        began = time.perf_counter()
        await asyncio.gather(*(_go(dsmo, run_id) for run_id in run_ids))
        results = await asyncio.gather(*(dsmo.result(run_id) for run_id in run_ids))
        wall = time.perf_counter() - began
        stats = await asyncio.to_thread(_server, url, "/stats")
        residence, dispatch, commits = [], [], []
        for run_id in run_ids:
            events = [e for e in await dsmo.events(run_id) if e.stage == "classify"]
            enqueued = next(e.at for e in events if e.type == "STAGE_ENQUEUED")
            started = next(e.at for e in events if e.type == "STAGE_STARTED")
            committed = next(e.at for e in events if e.type == "STAGE_SUCCEEDED")
            residence.append((committed - enqueued).total_seconds())
            dispatch.append((started - enqueued).total_seconds())
            commits.append(committed.timestamp())
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    return {
        "completed": sum(result.status == RunStatus.COMPLETED for result in results),
        "wall_seconds": round(wall, 2),
        "model_calls": stats["requests"],
        "peak_in_flight": stats["peakInFlight"],
        "residence": residence,
        "dispatch": dispatch,
        "commits": commits,
        "released_at": stats.get("releasedAt"),
    }


async def w5(
    settings: Settings, dsmo: DsmoClient, *, runs: int = 200, latency: float = 1.0, batches: int = 3
) -> dict[str, Any]:
    """Both contenders against one chat server, in alternating batches; the figures per contender."""
    port = free_port_block(1)
    url = f"http://127.0.0.1:{port}/v1"
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.llm_server", "--port", str(port), "--latency", str(latency), "--content", ANSWER],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    measured: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    try:
        await _until_up(url, server)
        # Alternated, so both contenders meet the same drift in the shared stack (its history grows).
        for batch in range(batches):
            for mode in MODES:
                print(f"W5: batch {batch + 1} of {batches}, {runs} runs, {mode}", flush=True)
                measured[mode].append(await _one_batch(settings, dsmo, url, mode, runs))
        # Only the async worker can hold every call at once (the other has 16 threads).
        print(f"W5: {runs} runs, {ASYNC}, all {runs} calls held in flight together", flush=True)
        held_batch = await _one_batch(settings, dsmo, url, ASYNC, runs, held=True)
        held = held_figures(held_batch, runs, latency, mode=ASYNC)
    finally:
        server.terminate()
        server.wait(timeout=10)
    modes = {mode: pooled(found, runs, latency) for mode, found in measured.items()}
    return {"runs": runs, "batches": batches, "latency_seconds": latency, "modes": modes, "held": held}
