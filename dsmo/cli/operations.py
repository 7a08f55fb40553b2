"""`dsmo dev`, `dsmo worker`, `dsmo definitions` and `dsmo runs`: commands for operators."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from datetime import datetime
from typing import Any

import click

from dsmo.cli.bulk_commands import bulk
from dsmo.cli.click_context import Context, pass_context, run
from dsmo.cli.export_command import export
from dsmo.cli.fork_command import fork
from dsmo.cli.migrate_command import migrate
from dsmo.cli.render import stack_lines
from dsmo.cli.rewind_command import rewind
from dsmo.client.query_errors import given_query
from dsmo.devstack.stack import DevStack
from dsmo.workflows.common.status import RunStatus


def register(cli: click.Group) -> None:
    for command in (dev, worker, runs):
        cli.add_command(command)


# -- the embedded stack ---------------------------------------------------------------------


@click.group()
def dev() -> None:
    """Start, check and stop the embedded stack (Temporal dev server + SeaweedFS S3)."""


@dev.command("up")
@click.option(
    "--worker",
    "with_worker",
    is_flag=True,
    help="Also start a background worker; it loads DSMO_LOAD and the dsmo.dev_plugins entry points (the examples).",
)
@click.option("--timeout", default=60.0, show_default=True, help="Seconds to wait for each service.")
@pass_context
def dev_up(obj: Context, with_worker: bool, timeout: float) -> None:
    """Start the stack (idempotent: a running stack is found and reused)."""
    stack = DevStack(obj.settings)
    reports = run(lambda: stack.up(with_worker=with_worker, timeout=timeout))
    click.echo("\n".join(stack_lines(reports)))
    temporal = obj.settings.temporal
    click.echo(
        f"namespace {temporal.namespace} keeps ended runs' histories {temporal.namespace_retention} "
        "(DSMO_NAMESPACE_RETENTION)"
    )
    click.echo(f"state and logs in {obj.settings.state_dir}")


@dev.command("down")
@pass_context
def dev_down(obj: Context) -> None:
    """Stop what `dsmo dev up` started (by pid file); anything else is left running."""
    click.echo("\n".join(stack_lines(DevStack(obj.settings).down())))


@dev.command("reset")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_context
def dev_reset(obj: Context, yes: bool) -> None:
    """Stop the stack and delete its data: every run's history, stored artifact and outbox message.

    For a clean slate, e.g. before `make bench`: the dev server's database only grows, and a
    large one slows every workflow task. Logs and the examples' own files are kept.
    """
    stack = DevStack(obj.settings)
    found = stack.stored_data()
    if not found:
        click.echo(f"nothing to delete under {obj.settings.state_dir}")
        return
    if not yes:
        click.confirm(
            f"Delete {', '.join(path.name for path in found)} under {obj.settings.state_dir} "
            "(every run and artifact of this stack)?",
            abort=True,
        )
    removed = run(stack.reset)
    click.echo(f"deleted {', '.join(path.name for path in removed) or 'nothing'} under {obj.settings.state_dir}")
    click.echo("start again with `dsmo dev up`")


@dev.command("status")
@pass_context
def dev_status(obj: Context) -> None:
    """Show whether each service is running and healthy."""
    reports = run(lambda: DevStack(obj.settings).status())
    click.echo("\n".join(stack_lines(reports)))
    if not all(report.up for report in reports):
        sys.exit(1)


@click.command()
@click.option(
    "--load",
    "modules",
    multiple=True,
    metavar="MODULE",
    help="Import this plugin module at start (repeatable); also DSMO_LOAD and `dsmo.plugins` entry points.",
)
def worker(modules: tuple[str, ...]) -> None:
    """Run a worker in the foreground, serving the agents, actions and channels its plugins register.

    \b
    Example:
      dsmo worker --load my_project.agents
    """
    from dsmo import worker as worker_module

    worker_module.main(load=modules)


# -- monitoring -----------------------------------------------------------------------------


@click.group()
def runs() -> None:
    """Runs on Temporal visibility: list them, the seed's monitoring queries, and bulk operations."""


runs.add_command(bulk)
runs.add_command(migrate)
runs.add_command(fork)
runs.add_command(rewind)
runs.add_command(export)


@runs.command("list")
@click.option("--status", type=click.Choice([status.value for status in RunStatus]), help="Only runs in this status.")
@click.option("--agent", help="Only runs of this agent.")
@click.option("--waiting-for", help="Only runs waiting for this (response, document, event, ...).")
@click.option("--query", help="A Temporal visibility query, AND-ed with the filters.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1), help="At most this many runs.")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def runs_list(
    obj: Context,
    status: str | None,
    agent: str | None,
    waiting_for: str | None,
    query: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Runs, newest first, with what each waits for and until when (from Temporal visibility)."""
    given_query(query)

    async def go() -> list[Any]:
        client = await obj.client()
        listed = client.runs(query, status=status, agent=agent, waiting_for=waiting_for, limit=limit)
        return [row async for row in listed]

    try:
        rows = run(go)
    except ValueError as bad:  # a filter that is not its kind of value, named
        raise click.UsageError(str(bad)) from None
    columns = ["run_id", "agent", "status", "waiting_for", "waiting_until", "started_at"]
    if any(row.llm_tokens is not None for row in rows):  # spend, once some run has asked a model
        columns += ["llm_tokens", "llm_cost_usd"]
    _print(rows, as_json, columns)


def _print(rows: list[Any], as_json: bool, columns: list[str]) -> None:
    dicts = [asdict(row) for row in rows]
    if as_json:
        click.echo(json.dumps(dicts, default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v)))
        return
    table = [columns] + [[_cell(d[c], c) for c in columns] for d in dicts]
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    for line in table:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())


def _cell(value: Any, column: str) -> str:
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, float):
        return f"{value:.4f}" if column.endswith("_usd") else f"{value:.1f}"
    return "" if value is None else str(value)


@runs.command("stats")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def runs_stats(obj: Context, as_json: bool) -> None:
    """Count and average age (seconds) of active runs per status."""

    async def go() -> Any:
        return await (await obj.client()).run_counts()

    _print(run(go), as_json, ["status", "count", "avg_age_seconds"])


@runs.command("waiting")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def runs_waiting(obj: Context, as_json: bool) -> None:
    """Runs in WAITING, ordered by waitingUntil."""

    async def go() -> Any:
        return await (await obj.client()).waiting_runs()

    _print(run(go), as_json, ["run_id", "agent", "waiting_for", "waiting_until", "age_hours"])


@runs.command("stuck")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def runs_stuck(obj: Context, as_json: bool) -> None:
    """Runs that do not move: WAITING past their waitingUntil, or whose workflow task keeps
    failing (exit code 1 if there are any)."""

    async def go() -> Any:
        return await (await obj.client()).stuck_runs()

    rows = run(go)
    _print(rows, as_json, ["run_id", "agent", "waiting_for", "waiting_until", "age_hours", "problem"])
    if rows:
        sys.exit(1)


@runs.command("watch")
@click.argument("run_id")
@click.option("--interval", default=0.5, show_default=True, help="Seconds between polls.")
@pass_context
def runs_watch(obj: Context, run_id: str, interval: float) -> None:
    """Follow a run live: status changes and audit events as they happen, until it ends.

    \b
    Example:
      dsmo runs watch ana-1
    """
    from dsmo.cli.bulk import watch

    view = run(lambda: watch(obj.settings, run_id, interval=interval))
    if view.status.value != "completed":
        sys.exit(1)
