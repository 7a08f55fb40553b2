"""W5, LLM-bound: three-stage runs whose middle stage waits ~1 s on a model, 200 at once on one
worker, with the model call made two ways: an `llm` stage (async, on the worker's event loop) and
a plain agent making the same call on the processor threads.

The model is `bench/llm_server.py` in its own process, answering every call after the same
latency. The ideal is the model's own bound: with C calls in flight and latency L, C/L calls per
second. The middle stage's throughput follows from Little's law, C divided by the mean time a
stage spends from being scheduled to being committed (queueing for a worker slot or a thread
included), so its ratio to the ideal is L over that mean. Each contender runs several batches,
alternated with the other's; a batch's wall time and the peak number of calls the server saw in
flight are reported beside it.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
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
        "last_commit": max(commits),
        "released_at": stats.get("releasedAt"),
    }


def held_figures(batch: dict[str, Any], runs: int, latency: float) -> dict[str, Any]:
    """A held batch: all ``runs`` calls in flight at once, answered together after ``latency``.

    From the moment the last call arrived, the ideal is every stage committed ``latency`` later;
    the ratio is ``latency`` over the time the worker took until its last output was committed.
    """
    released = batch["released_at"]
    window = batch["last_commit"] - released if released is not None else float("inf")
    return {
        "runs": runs,
        "completed": batch["completed"],
        "peak_in_flight": batch["peak_in_flight"],
        "released": released is not None and batch["peak_in_flight"] >= runs,
        "last_commit_seconds": round(window, 3),
        "ratio_to_ideal": round(latency / window, 3),
    }


def pooled(batches: list[dict[str, Any]], runs: int, latency: float) -> dict[str, Any]:
    """One contender's figures over its batches: stage timings pooled, the batch figures' median or total.

    Little's law per batch gives ``runs`` over the batch's mean residence; over the pooled
    stages it is the same with their common mean, and each batch's own ratio shows the spread.
    """
    residence = [seconds for batch in batches for seconds in batch["residence"]]
    dispatch = [seconds for batch in batches for seconds in batch["dispatch"]]
    mean = sum(residence) / len(residence)
    wall = statistics.median(batch["wall_seconds"] for batch in batches)
    return {
        "batches": len(batches),
        "runs": runs * len(batches),
        "completed": sum(batch["completed"] for batch in batches),
        "model_calls": sum(batch["model_calls"] for batch in batches),
        "peak_in_flight": max(batch["peak_in_flight"] for batch in batches),
        "wall_seconds": round(wall, 2),
        "runs_per_second": round(runs / wall, 2),
        "stage_mean_seconds": round(mean, 3),
        "stage_p95_seconds": round(percentile(residence, 95), 3),
        "dispatch_mean_seconds": round(sum(dispatch) / len(dispatch), 3),
        "stage_calls_per_second": round(runs / mean, 1),
        "ideal_calls_per_second": round(runs / latency, 1),
        "ratio_to_ideal": round(latency / mean, 3),
        "ratio_per_batch": [round(latency * len(b["residence"]) / sum(b["residence"]), 3) for b in batches],
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
        held = held_figures(await _one_batch(settings, dsmo, url, ASYNC, runs, held=True), runs, latency)
    finally:
        server.terminate()
        server.wait(timeout=10)
    modes = {mode: pooled(found, runs, latency) for mode, found in measured.items()}
    return {"runs": runs, "batches": batches, "latency_seconds": latency, "modes": modes, "held": held}


def w5_table(w5_results: dict[str, Any]) -> str:
    """The W5 figures as a markdown table, one column per contender."""
    modes = w5_results["modes"]
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("Runs completed", lambda f: f"{f['completed']:,} of {f['runs']:,}"),
        ("Model calls made", lambda f: f"{f['model_calls']:,}"),
        ("Peak model calls in flight (largest of the batches)", lambda f: f"{f['peak_in_flight']:,}"),
        ("LLM stage, mean time scheduled to committed (s)", lambda f: f"{f['stage_mean_seconds']:.3f}"),
        ("LLM stage, p95 (s)", lambda f: f"{f['stage_p95_seconds']:.3f}"),
        ("of which waiting for a worker to start it, mean (s)", lambda f: f"{f['dispatch_mean_seconds']:.3f}"),
        ("LLM stage throughput (calls/s, Little's law)", lambda f: f"{f['stage_calls_per_second']:.1f}"),
        ("Ideal (calls in flight / latency)", lambda f: f"{f['ideal_calls_per_second']:.1f}"),
        ("**Ratio to the ideal** (target async ≥ 0.8)", lambda f: f"{f['ratio_to_ideal']:.2f}"),
        ("Ratio in each batch", lambda f: " / ".join(f"{ratio:.2f}" for ratio in f["ratio_per_batch"])),
        ("From the go signal to the last run's end, median (s)", lambda f: f"{f['wall_seconds']:.1f}"),
        ("Runs ended per second after the go signal", lambda f: f"{f['runs_per_second']:.1f}"),
    ]
    lines = ["| " + " | ".join(["", *modes]) + " |", "|---" * (len(modes) + 1) + "|"]
    for label, cell in rows:
        lines.append("| " + " | ".join([label, *(cell(figures) for figures in modes.values())]) + " |")
    return "\n".join(lines)


def held_table(held: dict[str, Any], latency: float) -> str:
    """The held batch's figures (the async contender only)."""
    runs = held["runs"]
    rows = [
        ("Peak model calls in flight", f"{held['peak_in_flight']:,}"),
        ("Runs completed", f"{held['completed']:,} of {runs:,}"),
        (f"From the {runs}th call's arrival to the last output committed (s)", f"{held['last_commit_seconds']:.3f}"),
        (f"**Ratio to the ideal** ({latency:g} s / that time; target ≥ 0.8)", f"{held['ratio_to_ideal']:.2f}"),
    ]
    lines = [f"|  | {ASYNC} |", "|---|---|"]
    lines += [f"| {label} | {value} |" for label, value in rows]
    return "\n".join(lines)


W5_START, W5_END = "<!-- w5:start -->", "<!-- w5:end -->"


def w5_section(w5_results: dict[str, Any], command: str, started_at: str, machine: str) -> str:
    """The BENCHMARKS.md section, between its markers (so `--w5-only --update` can replace it alone)."""
    runs, batches = w5_results["runs"], w5_results.get("batches", 1)
    return f"""{W5_START}
## W5: LLM-bound stages

Measured by `{command}` on {started_at}, on {machine}. Batches of {runs} runs of
extract -> (wait) -> classify -> finish on one fresh worker, where classify waits
{w5_results["latency_seconds"]:g} s on a local OpenAI-compatible server (`bench/llm_server.py`, its own
process); {batches} batches per contender, alternated. The runs start, wait at a gate until all
have started, and one signal each releases them at once. **async** is an `llm` stage (the call
awaits on the worker's event loop; `DSMO_MAX_CONCURRENT_ACTIVITIES=256`); **thread pool** is a
plain agent making the same call with a blocking client on the processor threads (the defaults:
16 threads, 16 activities). The stage's throughput is Little's law over its stages (calls in
flight over the mean time from the workflow scheduling the stage to its output committed, pooled
over the batches); the ideal is the model's own bound, calls in flight over latency. The
releases themselves queue for the cores (each is a workflow task), so a batch's model calls
overlap less than {runs} at a time; the held batch below has them all in flight together.

{w5_table(w5_results)}
{_held_section(w5_results)}{W5_END}"""


def _held_section(w5_results: dict[str, Any]) -> str:
    held, latency = w5_results.get("held"), w5_results["latency_seconds"]
    if not held:
        return ""
    return f"""
With every call in flight at once: one more batch on the async worker, where the model answers
no call until all {held["runs"]} are waiting, then each {latency:g} s later. The ideal is every
stage committed {latency:g} s after the last call arrived.

{held_table(held, latency)}
"""
