"""A worker killed in the middle of a migration batch: the runs it was moving are moved by the next
worker from their histories, the batch finishes (or a re-run finishes it), and no run moves twice."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from functools import partial
from pathlib import Path

import pytest

from dsmo import DsmoClient, RunStatus, Settings
from dsmo.client.batches import RunOutcome
from dsmo.workflows.definition.model import parse_definition
from tests.polling import until
from tests.worker_processes import kill_worker, start_worker_process

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent


def flow(agent: str, version: str, message: str) -> dict[str, object]:
    return {
        "agent": agent,
        "version": version,
        "start": "ask",
        "nodes": {
            "ask": {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "bye"},
            "bye": {"actionType": "send_message", "parameters": {"message": message}},
        },
    }


async def test_a_worker_killed_mid_batch_leaves_no_run_moved_twice(
    dsmo: DsmoClient, stack_settings: Settings, tmp_path: Path
) -> None:
    queue = f"migrate-loss-{uuid.uuid4().hex[:8]}"
    settings = stack_settings.with_changes(temporal={"task_queue": queue}, worker={"metrics_bind": ""})
    agent = f"loss-{uuid.uuid4().hex[:8]}"
    v1, v2 = parse_definition(flow(agent, "1", "bye")), parse_definition(flow(agent, "2", "bye from 2"))
    await dsmo.publish(v1)
    await dsmo.publish(v2)
    log = tmp_path / "worker.log"
    worker = await start_worker_process(settings, log)
    try:
        runs = [(await dsmo.start(v1, {}, task_queue=queue)).run_id for _ in range(6)]
        for run_id in runs:
            await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        await until(lambda: _visible(dsmo, f"AgentName = '{agent}'", 6), "visibility lists the six runs")
        outcomes: list[RunOutcome] = []
        batch = asyncio.create_task(dsmo.migrate(agent, v2, rate=2, concurrency=2, on_outcome=outcomes.append))
        while len(outcomes) < 2:
            assert not batch.done(), batch
            await asyncio.sleep(0.05)
        kill_worker(worker)  # the moves in flight lose their worker
        worker = await start_worker_process(settings, log)
        first = await asyncio.wait_for(batch, timeout=120)
        again = await dsmo.migrate(agent, v2)
        assert again.summary()["done"] + first.summary()["done"] + first.summary()["skipped"] >= 6, (first, again)
        assert again.summary()["skipped"] + again.summary()["done"] == 6
        for run_id in runs:
            await until(partial(_on_version, dsmo, run_id, v2.workflow_version), f"{run_id} runs on version 2")
            await dsmo.respond(run_id, "ok")
            result = await dsmo.result(run_id)
            assert result.status is RunStatus.COMPLETED
            assert [e.type for e in await dsmo.events(run_id)].count("RUN_MIGRATED") == 1, run_id
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)


async def _visible(dsmo: DsmoClient, query: str, count: int) -> bool:
    return (await dsmo.temporal.count_workflows(query)).count == count


async def _on_version(dsmo: DsmoClient, run_id: str, version: str) -> bool:
    return (await dsmo.status(run_id)).workflow_version == version
