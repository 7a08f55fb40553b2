"""Cancelling and watching runs, one or many at once (with a progress bar), and batch redrive."""

from __future__ import annotations

import asyncio
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dsmo.cli.click_context import Context
from dsmo.cli.render import event_lines, status_lines
from dsmo.client.batches import RunOutcome
from dsmo.client.client_errors import WorkflowTaskFailing
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings

LIVE = "ExecutionStatus='Running'"


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


async def cancel_one(obj: Context, run_id: str, *, reason: str, by: str) -> str:
    """Cancel one run and wait for it to unwind; the line to print."""
    client = await obj.client()
    await client.cancel(run_id, reason=reason, by=by)
    try:
        result = await client.result(run_id)
    except WorkflowTaskFailing as failing:  # Temporal holds the request until the task runs again
        return f"cancel requested: {run_id} unwinds when its workflow task runs again ({failing})"
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

        report = await dsmo.bulk_cancel(f"{LIVE} AND ({query})", reason=reason, by=by, on_outcome=on_outcome)
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
    """Print status changes and new audit events as they happen, until the run ends."""
    dsmo = await DsmoClient.connect(settings)
    console = Console()
    seen, last_status, last_problem = 0, None, None
    while True:
        view = await dsmo.status(run_id)
        if view.status != last_status or view.problem != last_problem:
            console.rule(f"{run_id}: {view.status.value}")
            for line in status_lines(view, run_url=settings.temporal.run_url(run_id)):
                console.print(line, highlight=False)
            last_status, last_problem = view.status, view.problem
        if view.workflow_task_failure is not None:
            raise WorkflowTaskFailing(f"run {run_id!r}: {view.problem}")
        if view.problem is not None:  # no worker to answer: wait for one
            await asyncio.sleep(max(interval, 2.0))
            continue
        events = await dsmo.events(run_id) if view.started_at is not None else []
        for line in event_lines(events[seen:]):
            console.print(line, highlight=False)
        seen = max(seen, len(events))
        if view.status.terminal:
            return view
        await asyncio.sleep(interval)
