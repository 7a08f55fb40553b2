"""`make hostile`'s model-answer cases: what one hostile `llm` stage costs the other runs on its worker.

    python -m bench hostile --part llm [--out DIR] [--update]

Each case has a fresh worker (`python -m dsmo.worker`, its own process) calling a local chat
server (`bench/llm_server.py`, its own process). A control run (one `llm` node whose model
answers in `MODEL_LATENCY`, as a real model would) is timed alone, then beside each of `PAIRS`
hostile runs: the hostile run starts, and once the server has its request the control starts.
The ratio is the control's median beside a hostile stage over its median alone (bound:
`LATENCY_BOUND`); the worker's peak RSS is read before and after.
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
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.paths import REPO
from bench.report import machine
from bench.stack import Stack
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.devstack.stack import free_port_block
from dsmo.runtime.provisioning import worker_polling
from dsmo.workflows.definition.model import parse_definition

START, END = "<!-- hostile-llm:start -->", "<!-- hostile-llm:end -->"  # its section in BENCHMARKS.md
LATENCY_BOUND = 2.0
PAIRS = 10  # hostile runs per case, each with a control beside it
WORD = {"type": "object", "required": ["word"], "properties": {"word": {"type": "string", "pattern": "^(a+)+$"}}}
MODEL_LATENCY = 0.5  # seconds before the server answers the control's call (the hostile ones: at once)
CONTROL = {"agent": "control", "start": "ask", "nodes": {"ask": {"actionType": "llm", "prompt": "Say {{input.text}}"}}}


@dataclass
class WorkerCase:
    """One hostile answer to an `llm` stage, and what it cost the worker's other runs."""

    case: str
    outcome: str
    control_alone_s: float
    control_beside_s: float
    peak_mb: float
    over_baseline_mb: float

    @property
    def ratio(self) -> float:
        return self.control_beside_s / self.control_alone_s

    @property
    def within_bound(self) -> bool:
        return self.ratio <= LATENCY_BOUND


def _hostile(schema: dict[str, Any] | None) -> dict[str, Any]:
    ask: dict[str, Any] = {
        "actionType": "llm",
        "prompt": "Say {{input.text}}",
        "retries": 1,
        "transitions": [{"to": "done"}],
    }
    if schema is not None:
        ask["outputSchema"] = schema
    return {
        "agent": "hostile-llm",
        "start": "ask",
        "failSafe": "review",
        "nodes": {
            "ask": ask,
            "done": {"actionType": "send_message", "parameters": {"message": "done"}},
            "review": {"actionType": "send_message", "parameters": {"message": "review"}},
        },
    }


# (case, the node's schema, the replies to its two calls: the answer and the repair's)
CASES: list[tuple[str, dict[str, Any] | None, list[dict[str, Any]]]] = [
    ("`^(a+)+$` against 1 MiB of `a` and `!`", WORD, [{"content": json.dumps({"word": "a" * (1 << 20) + "!"})}] * 2),
    ("a 150 MB answer (cap 4 MiB)", None, [{"streamed": 150 << 20}]),
]


def _server(url: str, path: str, body: Any = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url.removesuffix("/v1") + path, data=data, method="GET" if data is None else "POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for {pid}")


async def _control(dsmo: DsmoClient, queue: str) -> float:
    started = time.perf_counter()
    run_id = (await dsmo.start(parse_definition(CONTROL), {"text": "control"}, task_queue=queue)).run_id
    await asyncio.wait_for(dsmo.result(run_id), 300)
    return time.perf_counter() - started


async def _beside(
    dsmo: DsmoClient, url: str, queue: str, schema: dict[str, Any] | None, replies: list[Any]
) -> tuple[float, str]:
    """One hostile run with a control run beside it: the control's latency, the hostile run's route."""
    at_once = [{**reply, "latency": 0.0} for reply in replies]
    await asyncio.to_thread(_server, url, "/script?for=hostile", at_once)
    before = (await asyncio.to_thread(_server, url, "/stats"))["requests"]
    run_id = (await dsmo.start(parse_definition(_hostile(schema)), {"text": "hostile"}, task_queue=queue)).run_id
    while (await asyncio.to_thread(_server, url, "/stats"))["requests"] == before:
        await asyncio.sleep(0.01)
    latency = await _control(dsmo, queue)
    result = await asyncio.wait_for(dsmo.result(run_id), 300)
    violation = next((e for e in await dsmo.events(run_id) if e.type == "CONTRACT_VIOLATION"), None)
    reason = violation.data["reason"].rsplit("llm: ", 1)[-1] if violation is not None else "no contract violation"
    return latency, f"{' -> '.join(result.path)}: {reason[:100]}"


async def measure_llm_worker(settings: Settings) -> list[WorkerCase]:
    """Every case, each on a fresh worker, against one chat server."""
    port = free_port_block(1)
    url = f"http://127.0.0.1:{port}/v1"
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.llm_server", "--port", str(port), "--latency", str(MODEL_LATENCY)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    dsmo = await DsmoClient.connect(settings)
    try:
        return [await _one_case(settings, dsmo, url, *case) for case in CASES]
    finally:
        server.terminate()
        server.wait(timeout=10)


async def _one_case(
    settings: Settings, dsmo: DsmoClient, url: str, name: str, schema: dict[str, Any] | None, replies: list[Any]
) -> WorkerCase:
    queue = f"hostile-llm-{uuid.uuid4().hex[:6]}"
    folder = Path(tempfile.mkdtemp(prefix="dsmo-hostile-llm-"))
    env = {
        **os.environ,
        **settings.to_env(),
        "DSMO_TASK_QUEUE": queue,
        "DSMO_METRICS_BIND": "off",
        "DSMO_LLM_BASE_URL": url,
        "DSMO_OUTBOX_DIR": str(folder / "outbox"),
    }
    with (folder / "worker.log").open("wb") as log:
        worker = subprocess.Popen([sys.executable, "-m", "dsmo.worker"], env=env, cwd=REPO, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 90
        while not await worker_polling(settings.with_changes(temporal={"task_queue": queue}), worker.pid):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the worker did not start; see {folder / 'worker.log'}")
            await asyncio.sleep(0.2)
        await _control(dsmo, queue)  # warm: the first run pays for imports and connections
        alone = statistics.median([await _control(dsmo, queue) for _ in range(PAIRS)])
        base = _peak_rss_mb(worker.pid)
        found = [await _beside(dsmo, url, queue, schema, replies) for _ in range(PAIRS)]
        peak = _peak_rss_mb(worker.pid)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    beside = statistics.median(latency for latency, _ in found)
    return WorkerCase(name, found[-1][1], alone, beside, peak, peak - base)


def worker_table(cases: list[WorkerCase]) -> str:
    lines = [
        "| hostile answer to an `llm` stage | the hostile run | control alone (s) | control beside it (s) "
        f"| ratio (bound {LATENCY_BOUND:.0f}x) | worker peak RSS (MB) | over baseline (MB) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for case in cases:
        lines.append(
            f"| {case.case} | {case.outcome.replace('|', '/')} | {case.control_alone_s:.2f} "
            f"| {case.control_beside_s:.2f} | {case.ratio:.2f} | {case.peak_mb:.0f} | {case.over_baseline_mb:.0f} |"
        )
    return "\n".join(lines)


def section(cases: list[WorkerCase]) -> str:
    """The BENCHMARKS.md section, between its markers."""
    return f"""{START}
## Hostile answers to an `llm` stage

Measured by `make hostile` on {datetime.now(UTC).isoformat(timespec="seconds")}, on {machine()}.
Each case runs a fresh `dsmo worker` (its own process) calling a local chat server: a control run
(one `llm` node whose model answers in {MODEL_LATENCY:g} s) is timed alone (median of {PAIRS}), then
beside each of {PAIRS} hostile runs, started once the server has the hostile run's request. The
bound is the control's median within {LATENCY_BOUND:g}x its median alone; the worker's peak RSS
is read before and after. Before RE2 and the response cap (issue 35), 29 `a`s against `^(a+)+$`
made a control run take 18.7 s instead of 0.55 s, and a 150 MB answer took the worker from
330 MB to a 1.89 GB peak.

{worker_table(cases)}
{END}"""


async def on_a_stack(stack: Stack, out_dir: Path) -> list[WorkerCase]:
    """`measure_llm_worker` on ``stack()``; writes ``out_dir/hostile-llm.json``."""
    async with stack() as (settings, _):
        cases = await measure_llm_worker(settings)
    out_dir.mkdir(parents=True, exist_ok=True)
    found = [asdict(case) | {"ratio": case.ratio, "withinBound": case.within_bound} for case in cases]
    document = {"latencyBound": LATENCY_BOUND, "cases": found}
    (out_dir / "hostile-llm.json").write_text(json.dumps(document, indent=2) + "\n")
    return cases
