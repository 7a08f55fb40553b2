"""`dsmo runs bulk cancel|redrive|deliver`: one operation on every run a visibility filter selects,
through DSMO's own single-run paths, with per-run lines, a progress bar, a summary and a JSON report."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import click

from dsmo.cli.click_context import Context, json_object, pass_context, run
from dsmo.client.batches import BatchReport, RunOutcome
from dsmo.client.bulk_operations import FAILED_RUNS, default_batch_id
from dsmo.client.client_errors import InvalidQuery
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.query_errors import given_query
from dsmo.client.run_selection import Scope
from dsmo.workflows.common.errors import DsmoError

DONE = {"cancel": "cancelled", "redrive": "redriven", "deliver": "delivered", "migrate": "migrated"}
Operation = Callable[[DsmoClient, Callable[[RunOutcome], None]], Awaitable[BatchReport]]


def batch_flags(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options every batch command shares, besides how it selects runs."""
    for option in reversed(
        [
            click.option("--dry-run", is_flag=True, help="Send nothing: say what would be done to each run."),
            click.option("--rate", type=click.FloatRange(min=0, min_open=True), help="At most N runs per second."),
            click.option("--limit", type=click.IntRange(min=1), help="At most N runs."),
            click.option(
                "--json", "as_json", is_flag=True, help="The report as JSON on stdout (per-run lines on stderr)."
            ),
        ]
    ):
        fn = option(fn)
    return fn


def batch_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options every bulk command shares: a required --query and the batch flags."""
    query = click.option("--query", required=True, help="A Temporal visibility filter selecting the runs.")
    return query(batch_flags(fn))


@click.group()
def bulk() -> None:
    """Cancel, redrive or deliver an event to many runs at once, selected by a visibility filter.

    Each run goes through the same path as one would (`dsmo cancel`, `dsmo dlq redrive`,
    `dsmo events --type`): validated, recorded in its trail. Running the same command again
    changes nothing already done (those runs are `skipped`). Exit code 1 when any run
    `failed` (an error); a run DSMO `refused` (for example not waiting for the event) is not
    a failure.
    """


@bulk.command("cancel")
@batch_options
@click.option("--reason", required=True, help="Why the runs are cancelled (kept in each run's record and trail).")
@click.option("--by", "cancelled_by", default="user", show_default=True, help="Who cancels them.")
@pass_context
def bulk_cancel(
    obj: Context,
    query: str,
    dry_run: bool,
    rate: float | None,
    limit: int | None,
    as_json: bool,
    reason: str,
    cancelled_by: str,
) -> None:
    """Cancel every run the filter selects that has not ended; its saga is compensated as a single cancel's."""

    def operation(client: DsmoClient, on_outcome: Callable[[RunOutcome], None]) -> Awaitable[BatchReport]:
        return client.bulk_cancel(
            query, reason=reason, by=cancelled_by, dry_run=dry_run, rate=rate, limit=limit, on_outcome=on_outcome
        )

    run_batch_command(obj, "cancel", query, None, operation, limit=limit, as_json=as_json)


@bulk.command("redrive")
@batch_options
@pass_context
def bulk_redrive(obj: Context, query: str, dry_run: bool, rate: float | None, limit: int | None, as_json: bool) -> None:
    """Redrive the dead letters of every failed run the filter selects, each as a new linked run."""

    def operation(client: DsmoClient, on_outcome: Callable[[RunOutcome], None]) -> Awaitable[BatchReport]:
        return client.bulk_redrive(query, dry_run=dry_run, rate=rate, limit=limit, on_outcome=on_outcome)

    run_batch_command(obj, "redrive", query, FAILED_RUNS, operation, limit=limit, as_json=as_json, runs=Scope.ENDED)


@bulk.command("deliver")
@batch_options
@click.option("--type", "event_type", required=True, help="The resume event kind (EVENT_COMPLETED, ...).")
@click.option("--data", "data_json", default="{}", show_default=True, help="The event's data (a JSON object).")
@click.option(
    "--batch-id",
    help="The batch's id; each run's event id is BATCH-ID:RUN. Default: a hash of --type, --data and "
    "--query, so the same command run again is the same batch and delivers nothing twice.",
)
@pass_context
def bulk_deliver(
    obj: Context,
    query: str,
    dry_run: bool,
    rate: float | None,
    limit: int | None,
    as_json: bool,
    event_type: str,
    data_json: str,
    batch_id: str | None,
) -> None:
    """Deliver one resume event to every run the filter selects, each validated as a single delivery.

    A dry run cannot know whether a run will take the event (the run decides on delivery); it
    skips runs that have ended or already took this batch's event.
    """
    data = json_object(data_json, "--data")
    chosen = batch_id or default_batch_id(event_type, data, query)

    def operation(client: DsmoClient, on_outcome: Callable[[RunOutcome], None]) -> Awaitable[BatchReport]:
        return client.bulk_deliver(
            query, event_type, data, batch_id=chosen, dry_run=dry_run, rate=rate, limit=limit, on_outcome=on_outcome
        )

    run_batch_command(obj, "deliver", query, None, operation, limit=limit, as_json=as_json)


def outcome_line(operation: str, outcome: RunOutcome) -> str:
    """One run's line: ``cancelled RUN (...)``, ``would cancel RUN``, ``refused RUN: reason``, ..."""
    if outcome.outcome == "done":
        return f"{DONE.get(operation, operation)} {outcome.run_id}" + (f" ({outcome.reason})" if outcome.reason else "")
    if outcome.outcome == "would":
        return f"would {operation} {outcome.run_id}" + (f" ({outcome.reason})" if outcome.reason else "")
    return f"{outcome.outcome} {outcome.run_id}" + (f": {outcome.reason}" if outcome.reason else "")


def summary_line(report: BatchReport) -> str:
    """The batch in one line: the count of each outcome, refusals by reason."""
    summary = report.summary()
    counts = ", ".join(
        f"{summary[key]} {key}" for key in ("done", "would", "skipped", "refused", "failed") if summary[key]
    )
    reasons = "; ".join(f"{reason}: {n}" for reason, n in summary["refusedByReason"].items())
    dry = " (dry run)" if report.dry_run else ""
    return f"{report.operation}{dry}: {summary['total']} run(s): {counts or 'none selected'}" + (
        f" (refused: {reasons})" if reasons else ""
    )


def run_batch_command(
    obj: Context,
    operation: str,
    query: str,
    scope: str | None,
    go: Operation,
    *,
    limit: int | None,
    as_json: bool,
    runs: Scope = Scope.ANY,
) -> None:
    """Run a batch with per-run lines, a progress bar on a terminal, a summary and ``--json``'s report.

    Exits 1 when any run ``failed``, 130 when interrupted (the same command again finishes it).

    Raises:
        InvalidQuery: ``query`` is empty or blank (refused before Temporal is reached).
    """
    given_query(query)
    # rich is loaded only by the commands that draw with it: every other command starts faster.
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    lines = Console(stderr=as_json, highlight=False, soft_wrap=True)
    bar = Console(stderr=True)

    async def batch() -> BatchReport:
        client = await obj.client()
        with Progress(
            TextColumn(operation),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=bar,
            disable=not bar.is_terminal,
            transient=True,
        ) as progress:
            total = await client.count_runs(query, scope=scope, runs=runs) if bar.is_terminal else None
            if total is not None and limit is not None:
                total = min(total, limit)
            task = progress.add_task(operation, total=total)

            def on_outcome(outcome: RunOutcome) -> None:
                lines.print(outcome_line(operation, outcome), markup=False)
                progress.advance(task)

            return await go(client, on_outcome)

    try:
        report = run(batch)
    except InvalidQuery as err:
        raise DsmoError(f"--query: {str(err).removeprefix('query: ')}") from None
    except KeyboardInterrupt:
        # Runs already handled stay handled; the same command again skips them and does the rest.
        click.echo(f"{operation}: interrupted; run the same command again to finish the batch", err=True)
        sys.exit(130)
    click.echo(summary_line(report), err=as_json)
    if as_json:
        click.echo(json.dumps(report.to_json(), ensure_ascii=False))
    if report.summary()["failed"]:
        sys.exit(1)
