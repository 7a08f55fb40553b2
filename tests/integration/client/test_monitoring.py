"""The seed's monitoring queries as `dsmo runs stats|waiting|stuck`, on Temporal visibility."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from dsmo.activities.messaging import FileChannel
from dsmo.client import monitoring
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.polling import until, until_value

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent


def waiting(timeout: str) -> Any:
    return parse_definition(
        {
            "agent": "monitored",
            "start": "w",
            "nodes": {"w": {"actionType": "wait_for_response", "parameters": {"timeout": timeout}}},
        }
    )


async def runs_cli(harness: Harness, *args: str) -> tuple[int, Any]:
    proc = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), "runs", *args, "--json"],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=60,
    )
    return proc.returncode, json.loads(proc.stdout)


async def test_stats_and_waiting_order(harness: Harness) -> None:
    later = await harness.start(waiting("48h"))
    sooner = await harness.start(waiting("2h"))
    for run_id in (later, sooner):
        await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})

    async def both_listed() -> list[str]:
        rows = await monitoring.waiting(harness.dsmo.temporal)
        ids = [row.run_id for row in rows if row.run_id in (later, sooner)]
        return ids if len(ids) == 2 else []

    assert await until_value(both_listed, bool, "both runs listed as waiting") == [sooner, later]  # by waitingUntil
    code, rows = await runs_cli(harness, "waiting")
    assert code == 0 and {sooner, later} <= {row["run_id"] for row in rows}
    mine = next(row for row in rows if row["run_id"] == sooner)
    assert mine["waiting_for"] == "response" and mine["agent"] == "monitored"

    code, stats = await runs_cli(harness, "stats")
    assert code == 0 and [row["status"] for row in stats] == ["pending", "running", "waiting"]
    assert next(row for row in stats if row["status"] == "waiting")["count"] >= 2


async def test_stuck_lists_a_wait_whose_timeout_was_never_processed(harness: Harness) -> None:
    """Seed's 'Detectar Stuck': waiting past waitingUntil, e.g. while no worker runs."""
    dsmo = harness.dsmo
    task_queue = f"stuck-{uuid.uuid4().hex[:8]}"
    channel = FileChannel(harness.outbox)
    async with build_worker(dsmo.temporal, task_queue=task_queue, store=harness.store, channel=channel):
        # 6 s: the worker must be gone before the timer fires, on a slow machine too.
        run_id = (await dsmo.start(waiting("6s"), task_queue=task_queue)).run_id
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await asyncio.sleep(7)  # the timer fires, but no worker processes it

    async def listed() -> bool:
        return run_id in [row.run_id for row in await monitoring.stuck(dsmo.temporal)]

    await until(listed, f"{run_id} listed as stuck")
    code, rows = await runs_cli(harness, "stuck")
    assert code == 1 and run_id in [row["run_id"] for row in rows]
    async with build_worker(dsmo.temporal, task_queue=task_queue, store=harness.store, channel=channel):
        result = await dsmo.result(run_id)  # a worker comes back and processes the timeout
    assert result.status is RunStatus.COMPLETED

    async def gone() -> bool:
        return run_id not in [row.run_id for row in await monitoring.stuck(dsmo.temporal)]

    await until(gone, f"{run_id} no longer listed as stuck")
