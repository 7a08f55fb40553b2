"""W5, LLM-bound: three-stage runs whose middle stage waits ~1 s on a model, 200 at once on one
worker, with the model call made two ways: an `llm` stage (async, on the worker's event loop) and
a plain agent making the same call on the processor threads.

The model is `bench/llm_server.py` in its own process, answering every call after the same
latency. The ideal is the model's own bound: with C calls in flight and latency L, C/L calls per
second. The middle stage's throughput follows from Little's law, C divided by the mean time a
stage spends from being scheduled to being committed (queueing for a worker slot or a thread
included), so its ratio to the ideal is L over that mean. The batch's wall time and the peak number
of calls the server saw in flight are reported beside it.
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

from bench.metrics import percentile
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
MODES: dict[str, dict[str, str]] = {
    "async (llm stage)": {"DSMO_MAX_CONCURRENT_ACTIVITIES": "256", "DSMO_PROCESSOR_THREADS": "32"},
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


async def _one_mode(
    settings: Settings, dsmo: DsmoClient, url: str, mode: str, runs: int, latency: float
) -> dict[str, Any]:
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
        residence, dispatch = [], []
        for run_id in run_ids:
            events = [e for e in await dsmo.events(run_id) if e.stage == "classify"]
            enqueued = next(e.at for e in events if e.type == "STAGE_ENQUEUED")
            started = next(e.at for e in events if e.type == "STAGE_STARTED")
            committed = next(e.at for e in events if e.type == "STAGE_SUCCEEDED")
            residence.append((committed - enqueued).total_seconds())
            dispatch.append((started - enqueued).total_seconds())
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    mean = sum(residence) / len(residence)
    return {
        "runs": runs,
        "completed": sum(result.status == RunStatus.COMPLETED for result in results),
        "wall_seconds": round(wall, 2),
        "runs_per_second": round(runs / wall, 2),
        "model_calls": stats["requests"],
        "peak_in_flight": stats["peakInFlight"],
        "stage_mean_seconds": round(mean, 3),
        "stage_p95_seconds": round(percentile(residence, 95), 3),
        "dispatch_mean_seconds": round(sum(dispatch) / len(dispatch), 3),
        "stage_calls_per_second": round(runs / mean, 1),
        "ideal_calls_per_second": round(runs / latency, 1),
        "ratio_to_ideal": round(latency / mean, 3),
    }


async def w5(settings: Settings, dsmo: DsmoClient, *, runs: int = 200, latency: float = 1.0) -> dict[str, Any]:
    """Both contenders against one chat server; returns the figures per contender."""
    port = free_port_block(1)
    url = f"http://127.0.0.1:{port}/v1"
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.llm_server", "--port", str(port), "--latency", str(latency), "--content", ANSWER],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await _until_up(url, server)
        measured = {}
        for mode in MODES:
            print(f"W5: {runs} runs, {mode}", flush=True)
            measured[mode] = await _one_mode(settings, dsmo, url, mode, runs, latency)
    finally:
        server.terminate()
        server.wait(timeout=10)
    return {"runs": runs, "latency_seconds": latency, "modes": measured}


def w5_table(w5_results: dict[str, Any]) -> str:
    """The W5 figures as a markdown table, one column per contender."""
    modes = w5_results["modes"]
    rows = [
        ("Runs completed", "completed", "{:,}"),
        ("Model calls made", "model_calls", "{:,}"),
        ("Peak model calls in flight", "peak_in_flight", "{:,}"),
        ("LLM stage, mean time scheduled to committed (s)", "stage_mean_seconds", "{:.3f}"),
        ("LLM stage, p95 (s)", "stage_p95_seconds", "{:.3f}"),
        ("of which waiting for a worker to start it, mean (s)", "dispatch_mean_seconds", "{:.3f}"),
        ("LLM stage throughput (calls/s, Little's law)", "stage_calls_per_second", "{:.1f}"),
        ("Ideal (calls in flight / latency)", "ideal_calls_per_second", "{:.1f}"),
        ("**Ratio to the ideal** (target async ≥ 0.8)", "ratio_to_ideal", "{:.2f}"),
        ("From the go signal to the last run's end (s)", "wall_seconds", "{:.1f}"),
        ("Runs ended per second after the go signal", "runs_per_second", "{:.1f}"),
    ]
    lines = ["| " + " | ".join(["", *modes]) + " |", "|---" * (len(modes) + 1) + "|"]
    for label, key, pattern in rows:
        lines.append("| " + " | ".join([label, *(pattern.format(figures[key]) for figures in modes.values())]) + " |")
    return "\n".join(lines)


W5_START, W5_END = "<!-- w5:start -->", "<!-- w5:end -->"


def w5_section(w5_results: dict[str, Any], command: str, started_at: str, machine: str) -> str:
    """The BENCHMARKS.md section, between its markers (so `--w5-only --update` can replace it alone)."""
    return f"""{W5_START}
## W5: LLM-bound stages

Measured by `{command}` on {started_at}, on {machine}. {w5_results["runs"]} runs of
extract -> (wait) -> classify -> finish on one worker, where classify waits
{w5_results["latency_seconds"]:g} s on a local OpenAI-compatible server (`bench/llm_server.py`, its own
process). The runs start, wait at a gate until all have started, and one signal each releases
them, so their model calls go out together. **async** is an `llm` stage (the call awaits on the
worker's event loop; `DSMO_MAX_CONCURRENT_ACTIVITIES=256`); **thread pool** is a plain agent
making the same call with a blocking client on the processor threads (the defaults: 16 threads,
16 activities). The stage's throughput is Little's law over the 200 stages (calls in flight over
the mean time from the workflow scheduling the stage to its output committed); the ideal is the
model's own bound, calls in flight over latency.

{w5_table(w5_results)}
{W5_END}"""
