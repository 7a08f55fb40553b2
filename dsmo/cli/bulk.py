"""Cancelling and watching runs, one or many at once (with a progress bar), and batch redrive."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from temporalio.service import RPCError

from dsmo.cli.click_context import Context
from dsmo.cli.render import event_lines, status_lines
from dsmo.client.batches import RunOutcome
from dsmo.client.client_errors import InvalidQuery, RunClosed, RunNotFound, WorkflowTaskFailing
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.run_selection import Scope
from dsmo.client.run_stream import StreamItem
from dsmo.config.settings import Settings
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import AuditEvent


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal,  # a pipe or a log gets the outcome lines, not a bar
    )


async def cancel_one(obj: Context, run_id: str, *, reason: str, by: str) -> str:
    """Cancel one run and wait for it to unwind (unless no worker serves it, or its task fails:
    the cancel is then requested, and the line says so); the line to print.

    Raises:
        RunClosed: The run had decided how it ends (failed, completed, timed out) before the
            cancel reached it, and ended so: the cancel changed nothing, as for a run that had
            already ended when it was sent.
    """
    client = await obj.client()
    await client.cancel(run_id, reason=reason, by=by)
    view = await client.status(run_id)
    if view.problem and not view.status.terminal:
        # No worker polls the run's queue, or its task fails: waiting for its end would hang.
        return f"cancel requested: {run_id} unwinds when its workflow task runs again ({view.problem})"
    try:
        result = await client.result(run_id)
    except WorkflowTaskFailing as failing:  # Temporal holds the request until the task runs again
        return f"cancel requested: {run_id} unwinds when its workflow task runs again ({failing})"
    if result.status is not RunStatus.CANCELLED:
        raise RunClosed(
            f"{run_id} ended {result.status.value} before the cancel took effect; a cancel cannot change "
            f"an ending the run had already decided (see `dsmo status {run_id}`)"
        )
    return f"{result.status.value}: {run_id} by {result.cancelled_by} ({result.cancel_reason})"


async def cancel_matching(settings: Settings, query: str, *, reason: str, by: str) -> tuple[int, int]:
    """Cancel every live run ``query`` selects through `DsmoClient.bulk_cancel`; (cancelled, failed)."""
    dsmo = await DsmoClient.connect(settings)
    console = Console(stderr=True)
    with _progress(console) as progress:
        task = progress.add_task("cancelling", total=None)

        def on_outcome(outcome: RunOutcome) -> None:
            if outcome.outcome == "failed":
                console.print(f"[yellow]{outcome.run_id}: {outcome.reason}")
            progress.advance(task)

        # Open runs only, kept apart from the filter: an error in it is named in the user's own text.
        try:
            report = await dsmo.bulk_cancel(query, reason=reason, by=by, on_outcome=on_outcome, runs=Scope.OPEN)
        except InvalidQuery as err:
            raise DsmoError(f"--query: {str(err).removeprefix('query: ')}") from None
    summary = report.summary()
    return summary["done"], summary["failed"]


async def redrive_all(settings: Settings) -> list[tuple[str, str]]:
    dsmo = await DsmoClient.connect(settings)
    pending = [row for row in await dsmo.dead_letters() if row.redriven_as is None]
    started: list[tuple[str, str]] = []
    with _progress(Console(stderr=True)) as progress:
        task = progress.add_task("redriving", total=len(pending))
        for row in pending:
            started.append((row.id, await dsmo.redrive(row.id)))
            progress.advance(task)
    return started


async def watch(settings: Settings, run_id: str, *, interval: float = 0.5) -> Any:
    """Print the run's live stream (`DsmoClient.stream`) until it ends: its audit events as they
    happen and a model's tokens as they arrive; a dropped connection resumes where it was."""
    dsmo = await DsmoClient.connect(settings)
    console = Console()
    await _status_block(dsmo, console, settings, run_id)
    after, mid_line = None, False
    while True:  # from the run's start, also for a run that has ended: its whole stream
        try:
            async for item in dsmo.stream(run_id, after=after):
                after = item.id
                if item.kind == "token":
                    sys.stdout.write(str(item.data.get("text", "")))
                    sys.stdout.flush()
                    mid_line = True
                    continue
                if mid_line:
                    sys.stdout.write("\n")
                    mid_line = False
                for line in _item_lines(item):
                    console.print(line, highlight=False)
        except (WorkflowTaskFailing, RunNotFound):
            raise
        except (DsmoError, RPCError, OSError) as dropped:  # the connection, not the run: go on from `after`
            console.print(f"stream interrupted ({dropped}); resuming", highlight=False, markup=False)
            await asyncio.sleep(max(interval, 1.0))
            continue
        view = await _status_block(dsmo, console, settings, run_id)
        if view.status.terminal:
            return view


async def _status_block(dsmo: DsmoClient, console: Console, settings: Settings, run_id: str) -> Any:
    view = await dsmo.status(run_id)
    if view.workflow_task_failure is not None:
        raise WorkflowTaskFailing(f"run {run_id!r}: {view.problem}")
    console.rule(f"{run_id}: {view.status.value}")
    for line in status_lines(view, run_url=settings.temporal.run_url(run_id)):
        console.print(line, highlight=False)
    return view


def _item_lines(item: StreamItem) -> list[str]:
    """What `dsmo runs watch` prints of a stream item that is not a token."""
    if item.kind == "event":
        return event_lines([AuditEvent.model_validate(item.data)])
    stage, attempt = item.data.get("stage"), item.data.get("attempt")
    if item.kind == "attempt" and item.data.get("retry"):
        return [f"{stage}: attempt {attempt} (a retry) streams from its start"]
    if item.kind == "abandoned":
        return [f"{stage}: attempt {attempt} ended without committing: its text is not the answer"]
    return []
