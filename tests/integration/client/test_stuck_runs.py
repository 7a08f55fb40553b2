"""Runs that cannot move are said to be so: a workflow task that keeps failing, a task queue no
worker polls. `dsmo status`, `dsmo runs stuck` and every command that waits say why, at once."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import urllib.request
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dsmo.activities.messaging import FileChannel
from dsmo.client.client_errors import WorkflowTaskFailing
from dsmo.client.connection import connect_temporal
from dsmo.client.core import ClientCore
from dsmo.client.dsmo_client import DsmoClient
from dsmo.runtime.telemetry import metrics_runtime
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import ExecutionRequest
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness, definition_from
from tests.polling import until_value
from tests.stack import free_port_block

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
# A node kind this worker does not know, as a definition from a newer DSMO would carry.
FROM_THE_FUTURE = {"agent": "future", "start": "a", "nodes": {"a": {"actionType": "teleport"}}}


def dsmo_cli(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "dsmo"), *args], capture_output=True, text=True, env=env, timeout=timeout, check=False
    )


async def test_a_failing_workflow_task_shows_in_status_runs_stuck_and_metrics(
    harness: Harness, cleanup: list[str]
) -> None:
    port = free_port_block(1)
    client = await connect_temporal(harness.settings, runtime=metrics_runtime(f"127.0.0.1:{port}"))
    dsmo = DsmoClient(client, harness.settings)
    queue = f"failing-{uuid.uuid4().hex[:8]}"
    run_id = f"future-{uuid.uuid4().hex[:8]}"
    cleanup.append(run_id)
    async with build_worker(client, task_queue=queue, store=harness.store, channel=FileChannel(harness.outbox)):
        # Started as an outside system would, with a short task timeout so the retries come quickly.
        await client.start_workflow(
            "AgentExecution",
            {"definition": FROM_THE_FUTURE, "input": {}},
            id=run_id,
            task_queue=queue,
            task_timeout=timedelta(seconds=1),
        )

        async def failing() -> Any:
            view = await dsmo.status(run_id)
            return view if view.workflow_task_failure else None

        view = await until_value(failing, bool, "the run's workflow task failing", seconds=90)
        assert view is not None and view.workflow_task_failure.attempts >= 2
        assert "teleport" in view.workflow_task_failure.error and view.workflow_task_failure.since is not None
        assert view.problem.startswith("workflow task failing since")

        shown = await asyncio.to_thread(dsmo_cli, harness.cli_env(), "status", run_id)
        assert shown.returncode == 0, shown.stderr
        assert "workflow task failing" in shown.stdout and "teleport" in shown.stdout

        async def stuck_row() -> Any:
            listed = await asyncio.to_thread(dsmo_cli, harness.cli_env(), "runs", "stuck", "--json")
            rows = [row for row in json.loads(listed.stdout or "[]") if row["run_id"] == run_id]
            return (listed.returncode, rows[0]) if rows else None

        found = await until_value(stuck_row, bool, "dsmo runs stuck lists the failing run", seconds=90)
        code, row = found
        assert code == 1 and "workflow task failing" in row["problem"] and "teleport" in row["problem"]

        with pytest.raises(WorkflowTaskFailing, match="teleport"):
            await asyncio.wait_for(dsmo.result(run_id), 30)
        watched = await asyncio.to_thread(dsmo_cli, harness.cli_env(), "runs", "watch", run_id)
        assert watched.returncode == 1 and "workflow task failing" in watched.stderr, watched.stderr
        body = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
        )
    failures = [
        line
        for line in body.splitlines()
        if line.startswith("temporal_workflow_task_execution_failed{") and f'task_queue="{queue}"' in line
    ]
    assert failures and float(failures[0].rsplit(" ", 1)[1]) >= 1


async def test_replay_stops_with_the_error_when_its_task_fails(harness: Harness, cleanup: list[str]) -> None:
    run_id = await harness.start(
        definition_from(EXAMPLES / "welcome_pack.yaml"), {"candidate": {"name": "A", "email": "a@x"}}
    )
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED
    # This CLI encrypts payloads with a key the test's worker does not have: the replay's
    # workflow task cannot decode its input and fails on every attempt.
    key = base64.b64encode(b"r" * 32).decode()
    env = {**harness.cli_env(), "DSMO_CODEC_KEYS": f"k9:{key}"}
    # It stops on the failure, naming it; a replay that waited for the run would never exit
    # (the timeout is only a hang guard).
    replayed = await asyncio.to_thread(dsmo_cli, env, "replay", run_id, timeout=120)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "workflow task failing" in replayed.stderr and "binary/encrypted" in replayed.stderr, replayed.stderr

    async def replays_listed() -> list[str]:  # visibility lists the replay's run asynchronously
        query = f"WorkflowId STARTS_WITH '{run_id}.replay-'"
        return [execution.id async for execution in harness.dsmo.temporal.list_workflows(query)]

    failing = await until_value(replays_listed, bool, "the replay's run listed", seconds=90)
    cleanup.extend(failing)
    assert len(failing) == 1


async def test_no_worker_is_named_at_once(
    harness: Harness, cleanup: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nobody = f"nobody-{uuid.uuid4().hex[:8]}"
    definition = parse_definition({"agent": "unserved", "start": "a", "nodes": {"a": {"actionType": "delay",
                                   "parameters": {"duration": "1s"}}}})  # fmt: skip
    run_id = (await harness.dsmo.start(definition, {}, task_queue=nobody)).run_id
    cleanup.append(run_id)
    env = {**harness.cli_env(), "DSMO_TASK_QUEUE": nobody}
    shown = await asyncio.to_thread(dsmo_cli, env, "status", run_id, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert f"no worker is polling task queue `{nobody}`" in shown.stdout
    assert "dsmo dev up --worker" in shown.stdout and "unserved" in shown.stdout
    stack = await asyncio.to_thread(dsmo_cli, {**env, "DSMO_STATE_DIR": str(tmp_path)}, "dev", "status")
    worker_lines = [line for line in stack.stdout.splitlines() if line.startswith("worker")]
    assert len(worker_lines) == 1 and "not running" in worker_lines[0], stack.stdout

    # The Python API says the same, and at once: from visibility and the task queue's pollers,
    # without sending the run a query that would wait for a worker until it timed out.
    async def no_query(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("status sent a query to a run no worker serves")

    monkeypatch.setattr(ClientCore, "query", no_query)
    view = await harness.dsmo.status(run_id)
    assert view.status is RunStatus.RUNNING and "no worker is polling" in (view.problem or "")

    # `dsmo cancel` records the request and says the run unwinds once a worker serves it (it
    # waited for the run's end, silently, for as long as no worker came).
    cancelled = await asyncio.to_thread(dsmo_cli, env, "cancel", run_id, "--reason", "test", timeout=60)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"cancel requested: {run_id} unwinds when its workflow task runs again" in cancelled.stdout
    assert f"no worker is polling task queue `{nobody}`" in cancelled.stdout
    history = await harness.dsmo.temporal.get_workflow_handle(run_id).fetch_history()
    assert any(event.HasField("workflow_execution_cancel_requested_event_attributes") for event in history.events)


def test_start_request_model_is_what_the_raw_start_sends() -> None:
    with pytest.raises(ValueError, match="teleport"):
        ExecutionRequest.model_validate({"definition": FROM_THE_FUTURE, "input": {}})


async def test_a_run_whose_workflow_task_fails_can_still_be_cancelled(harness: Harness, cleanup: list[str]) -> None:
    dsmo, queue = harness.dsmo, f"failing-{uuid.uuid4().hex[:8]}"
    run_id = f"future-{uuid.uuid4().hex[:8]}"
    cleanup.append(run_id)
    async with build_worker(dsmo.temporal, task_queue=queue, store=harness.store, channel=FileChannel(harness.outbox)):
        await dsmo.temporal.start_workflow(
            "AgentExecution",
            {"definition": FROM_THE_FUTURE, "input": {}},
            id=run_id,
            task_queue=queue,
            task_timeout=timedelta(seconds=1),
        )

        async def failing() -> Any:
            view = await dsmo.status(run_id)
            return view if view.workflow_task_failure else None

        await until_value(failing, bool, "the run's workflow task failing", seconds=90)
        with pytest.raises(WorkflowTaskFailing):
            await dsmo.variables(run_id)  # the run cannot answer a query...
        # ...yet the cancel is taken: Temporal holds it until the run's task runs again.
        cancelled = await asyncio.to_thread(
            dsmo_cli, harness.cli_env(), "cancel", run_id, "--reason", "stuck on a bad definition"
        )
        assert cancelled.returncode == 0, cancelled.stderr


async def test_temporal_saying_no_poller_was_seen_is_a_missing_worker(harness: Harness) -> None:
    """Temporal refuses a query at once when no worker polled the queue lately ("no poller seen"):
    that is no worker, which a live stream waits out, not an error that ends it."""
    from temporalio.service import RPCError, RPCStatusCode

    from dsmo.client.client_errors import NoWorker
    from dsmo.client.unanswered import query_error

    dsmo, queue = harness.dsmo, f"gone-{uuid.uuid4().hex[:8]}"
    waiting = parse_definition({"agent": "gone", "start": "ask", "nodes": {"ask": {"actionType": "wait_for_response"}}})
    async with build_worker(dsmo.temporal, task_queue=queue, store=harness.store, channel=FileChannel(harness.outbox)):
        run_id = (await dsmo.start(waiting, task_queue=queue)).run_id
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    handle = dsmo.temporal.get_workflow_handle(run_id)
    refused = RPCError(
        "no poller seen for task queue recently, worker may be down", RPCStatusCode.FAILED_PRECONDITION, b""
    )
    said = await query_error(dsmo.temporal, dsmo.settings, handle, "trail", refused)
    assert isinstance(said, NoWorker) and queue in str(said), said
    await handle.terminate(reason="test over")
