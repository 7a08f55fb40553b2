"""Every command that selects runs, from the command line, on runs with five continue-as-new
generations: each run is counted once, by its current execution.

Temporal's visibility has a row per execution, so each of these runs has six rows (five closed as
`ContinuedAsNew`). One fixture grows a waiting run and an ended one to six generations; each test
asks one command and checks it names each run once, in the state it is in now.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.messaging import FileChannel
from dsmo.activities.run_generations import generations
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.task_list import TaskFilter, task_page
from dsmo.config.settings import Settings
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition
from tests.conftest import Harness, registry_with
from tests.integration.client.test_run_selection import chat, refuse
from tests.polling import until

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
GENERATIONS = 6  # the current execution and the five it continued from


@dataclass
class FiveGenerations:
    """A waiting run and a failed run of one agent, each with six executions."""

    harness: Harness
    agent: str
    candidate: AgentDefinition  # the agent's next version: thanks instead of billing
    waiting: str
    failed: str
    subject: str
    tmp: Path

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "dsmo"), *args],
            check=False,
            capture_output=True,
            text=True,
            env=self.harness.cli_env(),
            timeout=180,
        )

    def json_of(self, *args: str, status: int = 0) -> Any:
        done = self.cli(*args, "--json")
        assert done.returncode == status, done.stdout + done.stderr
        return json.loads(done.stdout)


async def grown(harness: Harness, definition: AgentDefinition, subject: str) -> str:
    """A run of ``definition`` that has continued as new five times, waiting in its sixth execution."""
    temporal = harness.dsmo.temporal
    run_id = await harness.start(definition, {"customer": {"id": subject}}, history_limit=30)
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    sent = 0
    while len(await generations(temporal, run_id, (await temporal.get_workflow_handle(run_id).describe()).run_id)) < 6:
        assert sent < 200, "the run never continued as new five times"
        await harness.dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "more"}, event_id=f"more-{sent}")
        sent += 1
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    return run_id


async def rows(harness: Harness, query: str) -> int:
    return (await harness.dsmo.temporal.count_workflows(query)).count


@pytest_asyncio.fixture(scope="module")
async def five(
    dsmo: DsmoClient, store: ArtifactStore, stack_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[FiveGenerations]:
    tmp = tmp_path_factory.mktemp("generations")
    queue = f"gens-{uuid.uuid4().hex[:8]}"
    agent = f"gens-{uuid.uuid4().hex[:8]}"
    subject = f"G-{uuid.uuid4().hex[:8]}"
    worker = build_worker(
        dsmo.temporal,
        task_queue=queue,
        store=store,
        channel=FileChannel(tmp / "outbox"),
        registry=registry_with({"refuse": refuse}),
    )
    async with worker:
        harness = Harness(dsmo, store, queue, tmp / "outbox", stack_settings)
        definition, candidate = chat(agent), chat(agent, farewell="thank")
        await dsmo.publish(definition)
        await dsmo.publish(candidate)
        waiting, failed = await asyncio.gather(grown(harness, definition, subject), grown(harness, definition, subject))
        await dsmo.deliver_event(failed, "EVENT_COMPLETED", {"result": "stop"}, event_id="stop")
        assert (await dsmo.result(failed)).status is RunStatus.FAILED
        # Every generation's row is indexed before the commands are asked (what they must see past).
        by_agent = f"AgentName = '{agent}'"
        await until(
            lambda: _is(rows(harness, f"{by_agent} AND ExecutionStatus = 'ContinuedAsNew'"), 10),
            "both runs' five earlier generations indexed",
        )
        await until(
            lambda: _is(
                rows(harness, f"{by_agent} AND ExecutionStatus = 'Running' AND AgentExecutionStatus = 'waiting'"), 1
            ),
            "the waiting run's current generation indexed",
        )
        await until(
            lambda: _is(rows(harness, f"{by_agent} AND ExecutionStatus = 'Failed'"), 1), "the failed run's end indexed"
        )
        yield FiveGenerations(harness, agent, candidate, waiting, failed, subject, tmp)
        await dsmo.bulk_cancel(by_agent, reason="selection tests done")
    await harness.replay_all()


async def _is(count: Awaitable[int], expected: int) -> bool:
    return await count == expected


async def test_runs_list(five: FiveGenerations) -> None:
    listed = await asyncio.to_thread(five.json_of, "runs", "list", "--agent", five.agent)
    assert sorted((row["run_id"], row["status"]) for row in listed) == sorted(
        [(five.waiting, "waiting"), (five.failed, "failed")]
    ), listed
    waiting = await asyncio.to_thread(five.json_of, "runs", "list", "--agent", five.agent, "--status", "waiting")
    assert [row["run_id"] for row in waiting] == [five.waiting]


async def test_runs_waiting(five: FiveGenerations) -> None:
    listed = await asyncio.to_thread(five.json_of, "runs", "waiting")
    assert [row["run_id"] for row in listed if row["run_id"] in (five.waiting, five.failed)] == [five.waiting]


async def test_bulk_cancel_and_deliver(five: FiveGenerations) -> None:
    query = f"AgentName='{five.agent}'"
    cancel = await asyncio.to_thread(
        five.json_of, "runs", "bulk", "cancel", "--query", query, "--reason", "test", "--dry-run"
    )
    assert sorted((run["runId"], run["outcome"]) for run in cancel["runs"]) == sorted(
        [(five.waiting, "would"), (five.failed, "skipped")]
    ), cancel
    deliver = await asyncio.to_thread(
        five.json_of, "runs", "bulk", "deliver", "--query", query, "--type", "EVENT_COMPLETED", "--dry-run"
    )
    assert [(run["runId"], run["outcome"]) for run in deliver["runs"] if run["outcome"] == "would"] == [
        (five.waiting, "would")
    ], deliver
    assert deliver["summary"]["total"] == 2


async def test_bulk_redrive(five: FiveGenerations) -> None:
    redrive = await asyncio.to_thread(
        five.json_of, "runs", "bulk", "redrive", "--query", f"AgentName='{five.agent}'", "--dry-run"
    )
    assert [(run["runId"], run["outcome"]) for run in redrive["runs"]] == [(five.failed, "would")], redrive


async def test_migrate(five: FiveGenerations) -> None:
    moves = await asyncio.to_thread(
        five.json_of, "runs", "migrate", five.agent, "--to", five.candidate.workflow_version, "--dry-run"
    )
    assert [(run["runId"], run["outcome"]) for run in moves["runs"]] == [(five.waiting, "would")], moves


async def test_dead_letters(five: FiveGenerations) -> None:
    letters = await asyncio.to_thread(five.json_of, "dlq", "list")
    assert [letter["id"] for letter in letters if letter["id"].startswith(f"{five.failed}/")] == [f"{five.failed}/bill"]


async def test_what_if(five: FiveGenerations) -> None:
    query = f"AgentName='{five.agent}'"
    version = five.candidate.workflow_version
    report = await asyncio.to_thread(
        five.json_of, "replay", "--query", query, "--version", version, "--agent", five.agent, status=1
    )
    assert [run["run_id"] for run in report["runs"]] == [five.failed], report  # once, not once per generation
    assert report["summary"]["runs"] == 1 and report["errors"] == []
    five.harness.started.extend(run["replay_id"] for run in report["runs"])


async def test_console_task_list(five: FiveGenerations) -> None:
    page = await task_page(five.harness.dsmo.core, TaskFilter(agent=five.agent), datetime.now(UTC))
    assert [task.run_id for task in page.tasks] == [five.waiting] and page.total == 1


async def test_erasure_plan(five: FiveGenerations) -> None:
    plan = await asyncio.to_thread(five.json_of, "subjects", "erase", five.subject, "--reason", "test", "--dry-run")
    # Each run once, with every generation's history to delete (a what-if's replay, about the same
    # subject, is one more run of one execution).
    runs = {run["runId"]: len(run["executions"]) for run in plan["runs"] if ".whatif-" not in run["runId"]}
    assert runs == {five.waiting: GENERATIONS, five.failed: GENERATIONS}, plan
