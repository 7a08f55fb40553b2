"""`make hostile`, the event-loop part: a control run's latency while an async agent blocks the loop.

A real `dsmo worker` loads a plugin with three async agents: `control` (returns at once),
`loop-blocker` (``time.sleep(BLOCK_SECONDS)`` inside an ``async def``: the mistake) and
`declared-blocker` (the same, declared ``blocking=True``). The control run's latency (start to
result, through Temporal) is measured alone, then while each blocker holds its stage. Bounds:
the undeclared blocker is named in the worker's log and counted in ``dsmo_event_loop_stalls``
(nothing can give its stall back to the other runs); with the declared one, the control run stays
within 2x its normal latency. Prints a table and writes `bench/results/hostile-loop.json`.

    python -m bench hostile --part loop [--out DIR] [--update]
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

from bench.report import machine
from bench.stack import Stack
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.devstack.stack import free_port_block
from dsmo.runtime.provisioning import worker_polling
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition, parse_definition

START, END = "<!-- hostile-loop:start -->", "<!-- hostile-loop:end -->"  # its section in BENCHMARKS.md
BIN = Path(sys.executable).parent
BLOCK_SECONDS = 10
BOUND_FACTOR = 2.0  # a control run while a declared blocker runs: at most this times its normal
PLUGIN = f"""
import os
import time
from pathlib import Path

import dsmo


def _started(message):
    Path(os.environ["HOSTILE_STARTED"], message.run_id).touch()


@dsmo.agent("control")
async def control(document, message):
    return {{}}, {{}}


@dsmo.agent("loop-blocker")
async def loop_blocker(document, message):
    _started(message)
    time.sleep({BLOCK_SECONDS})
    return {{}}, {{}}


@dsmo.agent("declared-blocker", blocking=True)
async def declared_blocker(document, message):
    _started(message)
    time.sleep({BLOCK_SECONDS})
    return {{}}, {{}}
"""


@dataclass
class LoopCase:
    """A control run's latency while one async agent holds its stage."""

    case: str
    control_normal_s: float
    control_during_s: float
    named_in_log: bool
    stalls_counted: float
    bound: str
    within_bound: bool


def _definition(agent: str) -> AgentDefinition:
    nodes = {"work": {"actionType": "run_agent", "agent": agent}}
    return parse_definition({"agent": f"hostile-{agent}", "start": "work", "nodes": nodes})


async def _latency(dsmo: DsmoClient, queue: str) -> float:
    started = time.monotonic()
    run_id = (await dsmo.start(_definition("control"), {}, task_queue=queue)).run_id
    result = await dsmo.result(run_id)
    if result.status is not RunStatus.COMPLETED:
        raise RuntimeError(f"control run {run_id} ended {result.status}: {result.error_message}")
    return time.monotonic() - started


async def _while_blocking(dsmo: DsmoClient, queue: str, agent: str, started_dir: Path) -> float:
    """The control run's latency, started once the blocker's stage has begun."""
    run_id = (await dsmo.start(_definition(agent), {}, task_queue=queue)).run_id
    for _ in range(600):
        if (started_dir / run_id).exists():
            break
        await asyncio.sleep(0.05)
    else:
        raise RuntimeError(f"{agent} never started")
    latency = await _latency(dsmo, queue)
    await dsmo.result(run_id)
    return latency


def _stalls(metrics: str, name: str) -> float:
    body = urllib.request.urlopen(metrics, timeout=10).read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in body.splitlines()
        if line.startswith("dsmo_event_loop_stalls") and f'name="{name}"' in line
    )


async def measure(settings: Settings, out_dir: Path) -> list[LoopCase]:
    """Both cases against the stack ``settings`` name; writes ``out_dir/hostile-loop.json``."""
    with tempfile.TemporaryDirectory(prefix="dsmo-hostile-loop-") as folder:
        root = Path(folder)
        (root / "hostile_plugin.py").write_text(PLUGIN)
        (root / "started").mkdir()
        bind = f"127.0.0.1:{free_port_block(1)}"
        queue = f"hostile-loop-{uuid.uuid4().hex[:8]}"
        worker_settings = settings.with_changes(temporal={"task_queue": queue}, worker={"metrics_bind": bind})
        env = {**os.environ, **worker_settings.to_env(), "HOSTILE_STARTED": str(root / "started")}
        log = root / "worker.log"
        with open(log, "w") as stderr:
            process = subprocess.Popen(
                [str(BIN / "dsmo"), "worker", "--load", "hostile_plugin"],
                cwd=root,
                env=env,
                stdout=stderr,
                stderr=stderr,
            )
        try:
            deadline = time.monotonic() + 60
            while not await worker_polling(worker_settings, process.pid):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the worker did not start:\n{log.read_text()}")
                await asyncio.sleep(0.3)
            dsmo = await DsmoClient.connect(settings)
            await _latency(dsmo, queue)  # warm-up
            normal = statistics.median([await _latency(dsmo, queue) for _ in range(5)])
            cases = []
            for agent, declared in (("loop-blocker", False), ("declared-blocker", True)):
                during = await _while_blocking(dsmo, queue, agent, root / "started")
                await asyncio.sleep(1)  # the monitor reports on its first tick after the stall
                named = f"async agent {agent} " in log.read_text()
                counted = await asyncio.to_thread(_stalls, f"http://{bind}/metrics", agent)
                if declared:
                    bound = f"control <= {BOUND_FACTOR:g}x normal"
                    within = during <= BOUND_FACTOR * normal and not named
                else:
                    bound = "named in the log and counted"
                    within = named and counted >= 1
                label = f"async agent time.sleep({BLOCK_SECONDS})" + (", declared blocking" if declared else "")
                cases.append(LoopCase(label, normal, during, named, counted, bound, within))
        finally:
            process.terminate()
            process.wait(timeout=30)
    out_dir.mkdir(parents=True, exist_ok=True)
    document = {"blockSeconds": BLOCK_SECONDS, "cases": [asdict(case) for case in cases]}
    (out_dir / "hostile-loop.json").write_text(json.dumps(document, indent=2) + "\n")
    return cases


def table(cases: list[LoopCase]) -> str:
    lines = [
        "| hostile agent | control run alone (s) | control run meanwhile (s) | named in log | stalls counted "
        "| bound | within |",
        "|---|---:|---:|---|---:|---|---|",
    ]
    for case in cases:
        lines.append(
            f"| {case.case} | {case.control_normal_s:.2f} | {case.control_during_s:.2f} "
            f"| {'yes' if case.named_in_log else 'no'} | {case.stalls_counted:g} | {case.bound} "
            f"| {'yes' if case.within_bound else 'NO'} |"
        )
    return "\n".join(lines)


def section(cases: list[LoopCase]) -> str:
    """The BENCHMARKS.md section, between its markers."""
    return f"""{START}
## An async agent that blocks the worker's event loop

Measured by `make hostile` on {datetime.now(UTC).isoformat(timespec="seconds")}, on {machine()}.
A real `dsmo worker` runs a control run (one async stage that returns at once) alone (median of
5), then while an async agent calls `time.sleep({BLOCK_SECONDS})` in its stage, undeclared and then
declared `blocking=True`. The undeclared agent stalls every run on the worker (the control run
waits for the rest of its sleep); the bound is that the worker names it in its log and counts it
in `dsmo_event_loop_stalls`. Declared blocking, it runs on a processor thread: the bound is the
control run within {BOUND_FACTOR:g}x its normal latency.

{table(cases)}
{END}"""


async def on_a_stack(stack: Stack, out_dir: Path) -> list[LoopCase]:
    """`measure` on ``stack()``."""
    async with stack() as (settings, _):
        return await measure(settings, out_dir)
