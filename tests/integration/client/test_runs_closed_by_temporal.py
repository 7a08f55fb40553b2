"""Runs Temporal closes around DSMO (`temporal workflow terminate`, a workflow run timeout) show
that they ended, and how, though their own `status` query still says what they last did."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import WorkflowHandle

from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.integration.client.test_stuck_runs import dsmo_cli
from tests.polling import until_value

pytestmark = pytest.mark.integration

WAITER = {
    "agent": "closed-waiter",
    "start": "wait",
    "nodes": {
        "wait": {"actionType": "wait_for_response", "parameters": {"timeout": "48h"}, "next": "done"},
        "done": {"actionType": "send_message", "parameters": {"message": "ok"}},
    },
}


async def test_a_terminated_run_shows_cancelled_and_watch_exits(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(parse_definition(WAITER), {})
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING}, timeout=60)

    # A live run's status reads no history: the describe it makes anyway tells it has not closed.
    with monkeypatch.context() as patched:

        def no_history(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the status of a live run read its history")

        patched.setattr(WorkflowHandle, "fetch_history_events", no_history)
        patched.setattr(WorkflowHandle, "result", no_history)
        assert (await dsmo.status(run_id)).status is RunStatus.WAITING

    await dsmo.temporal.get_workflow_handle(run_id).terminate(reason="stuck on a bad deploy")
    view = await dsmo.status(run_id)
    assert view.status is RunStatus.CANCELLED and view.status.terminal
    assert view.result_type == "cancelled" and view.cancel_reason == "stuck on a bad deploy"
    assert view.cancelled_by  # the identity of the client that terminated it
    assert view.current_node == view.failed_action_id == "wait" and view.path == ["wait"]
    assert view.waiting_for is None and view.waiting_until is None and view.completed_at is not None
    assert "terminated through Temporal" in (view.result_summary or "")
    assert (await dsmo.wait_for_status(run_id, {RunStatus.CANCELLED}, timeout=10)).status is RunStatus.CANCELLED
    record = await dsmo.result(run_id)  # its record, as for any ended run (not Temporal's error)
    assert (record.status, record.cancel_reason, record.failed_action_id) == (
        RunStatus.CANCELLED,
        "stuck on a bad deploy",
        "wait",
    )

    shown = await asyncio.to_thread(dsmo_cli, harness.cli_env(), "status", run_id)
    assert shown.returncode == 0, shown.stderr
    assert "cancelled" in shown.stdout and "stuck on a bad deploy" in shown.stdout, shown.stdout
    # It follows the run's stream to its end and exits as for any run that did not complete
    # (it looped on `waiting` for ever before; the timeout is a hang guard).
    watched = await asyncio.to_thread(dsmo_cli, harness.cli_env(), "runs", "watch", run_id, timeout=60)
    assert watched.returncode == 1, watched.stdout + watched.stderr
    assert f"{run_id}: cancelled" in watched.stdout and "stuck on a bad deploy" in watched.stdout, watched.stdout

    # Visibility keeps the run's last own status; the list shows how Temporal ended it.
    async def listed() -> Any:
        rows = [row async for row in dsmo.runs(f"WorkflowId = '{run_id}'")]
        return rows[0] if rows and rows[0].closed_at is not None else None

    row = await until_value(listed, bool, "visibility lists the run as closed")
    assert (row.status, row.waiting_for, row.waiting_until) == ("cancelled", None, None), row


async def test_a_run_temporal_timed_out_shows_timeout(harness: Harness) -> None:
    dsmo = harness.dsmo
    run_id = f"closed-{uuid.uuid4().hex[:8]}"
    # Started as an outside system would, with a Temporal run timeout DSMO does not set.
    await dsmo.temporal.start_workflow(
        "AgentExecution",
        {"definition": WAITER, "input": {}},
        id=run_id,
        task_queue=harness.task_queue,
        run_timeout=timedelta(seconds=3),
    )
    harness.started.append(run_id)

    async def ended() -> Any:
        view = await dsmo.status(run_id)
        return view if view.status.terminal else None

    view = await until_value(ended, bool, "the run timed out by Temporal shown ended", seconds=60)
    assert view.status is RunStatus.TIMEOUT and view.result_type == "timeout"
    assert "timed out by Temporal (workflow run timeout 0:00:03)" in (view.result_summary or ""), view.result_summary
    assert (await dsmo.result(run_id)).status is RunStatus.TIMEOUT
    assert view.failed_action_id == "wait" and view.waiting_for is None


async def test_a_terminated_run_no_worker_serves_shows_cancelled_without_a_query(
    harness: Harness, cleanup: list[str]
) -> None:
    nobody = f"nobody-{uuid.uuid4().hex[:8]}"
    run_id = (await harness.dsmo.start(parse_definition(WAITER), {}, task_queue=nobody)).run_id
    cleanup.append(run_id)
    await harness.dsmo.temporal.get_workflow_handle(run_id).terminate(reason="nobody serves it")
    view = await harness.dsmo.status(run_id)  # from visibility and the close event: no worker to ask
    assert view.status is RunStatus.CANCELLED and view.cancel_reason == "nobody serves it"
    assert view.problem is None and view.agent == "closed-waiter"
