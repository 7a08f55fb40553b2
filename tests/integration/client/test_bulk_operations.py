"""`dsmo runs bulk cancel|redrive|deliver` and the client's bulk methods on the real stack: runs
selected by a visibility filter (this test's task queue), a dry run that changes nothing, a real
run that acts through DSMO's own single-run path, and a re-run that changes nothing."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from dsmo.activities.plugin_errors import InvalidInput
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry, default_registry
from dsmo.client.batches import BatchReport
from dsmo.client.bulk_operations import redrive_id
from dsmo.client.client_errors import RunAlreadyExists
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from dsmo_examples.orders.db import OrderDatabase
from tests.conftest import Harness
from tests.integration.saga.test_order_saga import order, with_wait
from tests.polling import until

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
FIXED: set[str] = set()  # correlation ids whose stage succeeds from now on


def fixed_later(document: Any, message: StageMessage) -> ProcessorOutput:
    if message.correlation_id not in FIXED:
        raise InvalidInput("input.total: must be a number")
    return ProcessorOutput(document={"fixed": True}, summary={"fixed": True})


@pytest.fixture
def registry() -> ProcessorRegistry:
    merged = ProcessorRegistry()
    for name in default_registry.names():
        processor = default_registry.get(name)
        merged.register(processor.name, processor.version)(processor.fn)
    merged.register("fixed-later", "1.0.0")(fixed_later)
    return merged


def response_waiter() -> AgentDefinition:
    return parse_definition(
        {
            "agent": "bulk-reply",
            "start": "wait",
            "nodes": {
                "wait": {"actionType": "wait_for_response", "next": "bye"},
                "bye": {"actionType": "send_message", "parameters": {"message": "bye {{lastResponse}}"}},
            },
        }
    )


def event_waiter() -> AgentDefinition:
    return parse_definition(
        {
            "agent": "bulk-event",
            "start": "wait",
            "nodes": {
                "wait": {
                    "actionType": "wait_for_event",
                    "parameters": {"event": "office-day", "title": "Office open"},
                    "next": "bye",
                },
                "bye": {"actionType": "send_message", "parameters": {"message": "office: {{eventResult}}"}},
            },
        }
    )


def failing_stage() -> AgentDefinition:
    return parse_definition(
        {
            "agent": "bulk-redrive",
            "start": "bill",
            "nodes": {
                "bill": {"actionType": "run_agent", "agent": "fixed-later", "next": "done"},
                "done": {"actionType": "send_message", "parameters": {"message": "billed"}},
            },
        }
    )


async def listed(harness: Harness, query: str, count: int) -> None:
    """Wait until visibility (eventually consistent) lists ``count`` runs for ``query``."""

    async def caught_up() -> bool:
        found = await harness.dsmo.temporal.count_workflows(f"TaskQueue='{harness.task_queue}' AND {query}")
        return found.count == count

    await until(caught_up, f"{count} runs listed as {query}")


async def snapshot(harness: Harness, run_ids: list[str]) -> dict[str, tuple[RunStatus, int]]:
    """Each run's status and trail length: what a batch that changes nothing leaves as it was."""
    return {
        run_id: ((await harness.dsmo.status(run_id)).status, len(await harness.dsmo.events(run_id)))
        for run_id in run_ids
    }


def outcomes(report: BatchReport) -> dict[str, tuple[str, str | None]]:
    return {o.run_id: (o.outcome, o.reason) for o in report.outcomes}


async def cli(harness: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), "runs", "bulk", *args],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=120,
    )


async def test_bulk_cancel_dry_run_then_cancel_then_a_rerun_that_changes_nothing(
    harness: Harness, order_db: OrderDatabase
) -> None:
    order_run = await harness.start(with_wait(), order())  # a saga mid-way: stock reserved, order created
    run_ids = [await harness.start(response_waiter()) for _ in range(2)] + [order_run]
    for run_id in run_ids:
        await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await listed(harness, "AgentExecutionStatus='waiting'", 3)
    query = f"TaskQueue='{harness.task_queue}'"
    before = await snapshot(harness, run_ids)

    dry = await harness.dsmo.bulk_cancel(query, reason="campaign closed", by="ops", dry_run=True)
    assert dry.dry_run and outcomes(dry) == dict.fromkeys(run_ids, ("would", None))
    assert await snapshot(harness, run_ids) == before

    seen: list[str] = []
    done = await harness.dsmo.bulk_cancel(
        query, reason="campaign closed", by="ops", rate=50, on_outcome=lambda o: seen.append(o.run_id)
    )
    assert done.summary()["done"] == 3 and sorted(seen) == sorted(run_ids)
    ended = {}
    for run_id in run_ids:
        result = await harness.dsmo.result(run_id)
        assert (result.status, result.cancelled_by, result.cancel_reason) == (
            RunStatus.CANCELLED,
            "ops",
            "campaign closed",
        )
        view = await harness.dsmo.status(run_id)
        assert (view.cancelled_by, view.cancel_reason) == ("ops", "campaign closed")
        trail = await harness.dsmo.events(run_id)
        assert trail[-1].type == "RUN_ABORTED" and trail[-1].data["resultType"] == "cancelled"
        assert (trail[-1].data["cancelledBy"], trail[-1].data["cancelReason"]) == ("ops", "campaign closed")
        ended[run_id] = (RunStatus.CANCELLED, len(trail))

    # The saga unwound as a single cancel unwinds it: LIFO, every step done so far.
    compensation = (await harness.dsmo.result(order_run)).compensation
    assert compensation is not None and compensation["compensated"] == ["reserve_stock", "create_order"]
    assert order_db.stock("lamp") == (10, 0)

    again = await harness.dsmo.bulk_cancel(query, reason="campaign closed", by="ops")
    assert outcomes(again) == dict.fromkeys(run_ids, ("skipped", "already ended"))
    assert await snapshot(harness, run_ids) == ended


async def test_bulk_cancel_asks_once_a_run_that_cannot_unwind_yet(harness: Harness) -> None:
    """A run with no worker takes the cancel request but cannot act on it; a re-run of the batch
    does not ask again (its history does not grow)."""
    queue = f"{harness.task_queue}-no-worker"
    run_id = (await harness.dsmo.start(response_waiter(), task_queue=queue)).run_id
    handle = harness.dsmo.temporal.get_workflow_handle(run_id)

    async def history_length() -> int:
        return len((await handle.fetch_history()).events)

    async def visible() -> bool:
        return (await harness.dsmo.temporal.count_workflows(f"TaskQueue='{queue}'")).count == 1

    await until(visible, "the run listed")
    try:
        query = f"TaskQueue='{queue}'"
        first = await harness.dsmo.bulk_cancel(query, reason="campaign closed")
        assert outcomes(first) == {run_id: ("done", "cancel requested")}
        asked = await history_length()
        again = await harness.dsmo.bulk_cancel(query, reason="campaign closed", dry_run=True)
        assert outcomes(again) == {run_id: ("skipped", "cancel already requested")}
        again = await harness.dsmo.bulk_cancel(query, reason="campaign closed")
        assert outcomes(again) == {run_id: ("skipped", "cancel already requested")}
        assert await history_length() == asked
    finally:
        await handle.terminate("test cleanup: no worker serves this queue")


async def test_bulk_redrive_dry_run_then_redrive_then_a_rerun_that_changes_nothing(harness: Harness) -> None:
    correlations = [f"bulk-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    run_ids = [await harness.start(failing_stage(), correlation_id=c) for c in correlations]
    for run_id in run_ids:
        assert (await harness.dsmo.result(run_id)).status is RunStatus.FAILED
    completed = await harness.start(response_waiter())  # not failed: the batch leaves it out
    await harness.dsmo.wait_for_status(completed, {RunStatus.WAITING})
    await listed(harness, "AgentExecutionStatus='failed'", 2)
    query = f"TaskQueue='{harness.task_queue}'"
    letters = {run_id: f"{run_id}/bill" for run_id in run_ids}

    async def redriven_as() -> dict[str, str | None]:
        rows = [row for run_id in run_ids for row in await harness.dsmo.dead_letters(run_id=run_id)]
        return {row.run_id: row.redriven_as for row in rows}

    assert await redriven_as() == dict.fromkeys(run_ids)
    dry = await harness.dsmo.bulk_redrive(query, dry_run=True)
    assert outcomes(dry) == {run_id: ("would", letters[run_id]) for run_id in run_ids}
    assert await redriven_as() == dict.fromkeys(run_ids)

    FIXED.update(correlations)  # the cause is fixed: reprocess the failed stages
    # An earlier batch was interrupted after it started one redrive and before it marked the letter.
    interrupted = run_ids[0]
    first_try = await harness.dsmo.redrive(letters[interrupted], new_id=redrive_id(letters[interrupted]))
    harness.store.s3.delete_object(Bucket=harness.store.bucket, Key=f"dlq/{letters[interrupted]}.redrive.json")
    assert await redriven_as() == dict.fromkeys(run_ids)
    # An id another run holds is no earlier attempt's: refused, and the letter left unmarked.
    with pytest.raises(RunAlreadyExists, match=f"taken by a run that is not a redrive of {run_ids[1]}"):
        await harness.dsmo.redrive(letters[run_ids[1]], new_id=completed)
    assert await redriven_as() == dict.fromkeys(run_ids)
    done = await harness.dsmo.bulk_redrive(query)
    assert {o.run_id for o in done.outcomes} == set(run_ids) and done.summary()["done"] == 2
    new_runs = await redriven_as()
    for outcome in done.outcomes:
        new_run = new_runs[outcome.run_id]
        assert new_run is not None and outcome.detail["redrivenAs"] == [new_run]
        assert (await harness.dsmo.result(new_run)).status is RunStatus.COMPLETED
        assert (await harness.dsmo.events(new_run))[0].data["redriveOf"] == outcome.run_id
    assert new_runs[interrupted] == first_try  # found and marked, not started twice
    trails = {run_id: len(await harness.dsmo.events(run_id)) for run_id in run_ids}

    again = await harness.dsmo.bulk_redrive(query)
    assert outcomes(again) == {run_id: ("skipped", f"already redriven as {new_runs[run_id]}") for run_id in run_ids}
    assert await redriven_as() == new_runs
    assert {run_id: len(await harness.dsmo.events(run_id)) for run_id in run_ids} == trails


async def test_bulk_deliver_through_the_cli_dry_run_deliver_and_a_rerun_that_changes_nothing(
    harness: Harness,
) -> None:
    waiting = [await harness.start(event_waiter()) for _ in range(2)]
    other = await harness.start(response_waiter())  # waits for a reply: refuses an event of a calendar
    run_ids = [*waiting, other]
    for run_id in run_ids:
        await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await listed(harness, "AgentExecutionStatus='waiting'", 3)
    query = f"TaskQueue='{harness.task_queue}'"
    event = ["--type", "EVENT_COMPLETED", "--data", '{"result": "closed", "data": {"why": "holiday"}}']
    before = await snapshot(harness, run_ids)

    dry = await cli(harness, "deliver", "--query", query, *event, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert report["dryRun"] is True and report["summary"]["would"] == 3
    assert {row["runId"]: row["outcome"] for row in report["runs"]} == dict.fromkeys(run_ids, "would")
    batch_ids = {row["detail"]["eventId"].rsplit(":", 1)[0] for row in report["runs"]}
    assert len(batch_ids) == 1 and batch_ids.pop().startswith("bulk-")  # derived from type, data, query
    assert f"would deliver {waiting[0]}" in dry.stderr
    assert await snapshot(harness, run_ids) == before

    proc = await cli(harness, "deliver", "--query", query, *event, "--rate", "20")
    assert proc.returncode == 0, proc.stderr  # a refusal is not a failure
    assert f"delivered {waiting[0]} (taken)" in proc.stdout, proc.stdout
    assert f"refused {other}: waiting for response: no wait ahead takes" in proc.stdout, proc.stdout
    assert "2 done, 1 refused (refused: waiting for response: 1)" in proc.stdout, proc.stdout
    for run_id in waiting:
        result = await harness.dsmo.result(run_id)
        assert result.status is RunStatus.COMPLETED and result.variables["eventResult"] == "closed"
    assert (await harness.dsmo.status(other)).status is RunStatus.WAITING
    after = await snapshot(harness, run_ids)
    assert after[other] == before[other]

    again = await cli(harness, "deliver", "--query", query, *event, "--json")
    assert again.returncode == 0, again.stderr
    rerun = {row["runId"]: (row["outcome"], row["reason"]) for row in json.loads(again.stdout)["runs"]}
    assert {run_id: rerun[run_id] for run_id in waiting} == dict.fromkeys(waiting, ("skipped", "already delivered"))
    assert rerun[other][0] == "refused"
    assert json.loads(again.stdout)["summary"]["refusedByReason"] == {"waiting for response": 1}
    assert await snapshot(harness, run_ids) == after


async def test_bulk_deliver_refuses_a_malformed_event_and_a_bad_query_before_any_run(harness: Harness) -> None:
    run_id = await harness.start(event_waiter())
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    query = f"TaskQueue='{harness.task_queue}'"
    before = await snapshot(harness, [run_id])

    malformed = await cli(harness, "deliver", "--query", query, "--type", "EVENT_COMPLETED", "--data", '{"result": ""}')
    bad_query = await cli(harness, "cancel", "--query", "NoSuchField = 'x' AND", "--reason", "r")
    for proc, fragment in ((malformed, "EVENT_COMPLETED rejected"), (bad_query, "--query: ")):
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {fragment}"), proc.stderr
    assert await snapshot(harness, [run_id]) == before
