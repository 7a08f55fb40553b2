"""An async agent that blocks the worker's event loop, in a real `dsmo worker`: named and counted.

`time.sleep` inside an ``async def`` stalls every run on the worker. The worker cannot stop it,
but it names it: a warning in its log naming the agent, the run and the stage, and a count in
``dsmo_event_loop_stalls`` on its Prometheus endpoint. The same agent declared ``blocking=True``
runs on a processor thread instead.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from dsmo import DsmoClient, RunStatus, Settings
from dsmo.runtime.provisioning import worker_polling
from dsmo.workflows.definition.model import parse_definition
from tests.polling import until_value
from tests.stack import free_port_block

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
# The block (3 s) is three times the worker's stall threshold (1 s): no race decides the test.
PLUGIN = """
import time

import dsmo


@dsmo.agent("loop-blocker")
async def loop_blocker(document, message):
    time.sleep(3)  # blocks the event loop every run on this worker shares
    return {"slept": 3}, {}


@dsmo.agent("declared-blocker", blocking=True)
async def declared_blocker(document, message):
    time.sleep(3)  # declared: runs on a processor thread, the loop goes on
    return {"slept": 3}, {}
"""


@dataclass
class Worker:
    settings: Settings
    log: Path
    metrics: str


@pytest_asyncio.fixture
async def worker(stack_settings: Settings, tmp_path: Path) -> AsyncIterator[Worker]:
    (tmp_path / "blocky.py").write_text(PLUGIN)
    bind = f"127.0.0.1:{free_port_block(1)}"
    settings = stack_settings.with_changes(
        temporal={"task_queue": f"blocky-{uuid.uuid4().hex[:8]}"}, worker={"metrics_bind": bind}
    )
    log = tmp_path / "worker.log"
    process = subprocess.Popen(
        [str(BIN / "dsmo"), "worker", "--load", "blocky"],
        cwd=tmp_path,
        env={**os.environ, **settings.to_env()},
        stdout=subprocess.DEVNULL,
        stderr=open(log, "w"),  # noqa: SIM115 - the child owns it
    )
    try:
        deadline = time.monotonic() + 60
        while not await worker_polling(settings, process.pid):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the worker did not start polling"
            await asyncio.sleep(0.3)
        yield Worker(settings, log, f"http://{bind}/metrics")
    finally:
        process.terminate()
        process.wait(timeout=30)


async def run_agent(dsmo: DsmoClient, worker: Worker, agent: str) -> str:
    definition = parse_definition(
        {"agent": "blocky", "start": "work", "nodes": {"work": {"actionType": "run_agent", "agent": agent}}}
    )
    run_id = (await dsmo.start(definition, {}, task_queue=worker.settings.temporal.task_queue)).run_id
    result = await asyncio.wait_for(dsmo.result(run_id), 60)
    assert result.status is RunStatus.COMPLETED, result.error_message
    return run_id


async def logged(worker: Worker, text: str) -> str:

    async def lines() -> list[str]:  # the monitor reports on its first tick after the stall
        return [line for line in worker.log.read_text().splitlines() if text in line]

    try:
        found = await until_value(lines, bool, f"the worker logs {text!r}")
    except AssertionError as err:
        raise AssertionError(f"the worker's log:\n{worker.log.read_text()}") from err
    return found[0]


def stalls(worker: Worker) -> dict[str, float]:
    body = urllib.request.urlopen(worker.metrics, timeout=10).read().decode()
    counts = {}
    for line in body.splitlines():
        if line.startswith("dsmo_event_loop_stalls") and 'kind="agent"' in line:
            name = line.split('name="', 1)[1].split('"', 1)[0]
            counts[name] = float(line.rsplit(" ", 1)[1])
    return counts


async def test_a_blocking_async_agent_is_named_in_the_log_and_counted(dsmo: DsmoClient, worker: Worker) -> None:
    run_id = await run_agent(dsmo, worker, "loop-blocker")
    line = await logged(worker, "async agent loop-blocker")
    assert f"(run {run_id}, stage work) held it for" in line and "WARNING" in line
    assert stalls(worker).get("loop-blocker") == 1.0


async def test_an_async_agent_declared_blocking_leaves_the_loop_alone(dsmo: DsmoClient, worker: Worker) -> None:
    await run_agent(dsmo, worker, "declared-blocker")
    await run_agent(dsmo, worker, "loop-blocker")  # after it: the monitor has looked since the first
    await logged(worker, "async agent loop-blocker")
    assert "declared-blocker" not in worker.log.read_text()
    assert "declared-blocker" not in stalls(worker)
