"""`dsmo`: the command line for people and scripts."""

from __future__ import annotations

import sys
import uuid
from typing import Any

import click

from dsmo.cli import catalog, operations, project, recovery, serve, subjects_command
from dsmo.cli.click_context import Context, json_object, pass_context, run
from dsmo.cli.decide_command import decide
from dsmo.cli.help_examples import add_examples
from dsmo.cli.hooks_command import hooks
from dsmo.cli.mcp_command import mcp
from dsmo.cli.render import ack_line
from dsmo.cli.start_command import start
from dsmo.cli.status_command import status
from dsmo.cli.trail_command import print_trail, trail_options
from dsmo.client.query_errors import given_query
from dsmo.client.run_requests import required_reason
from dsmo.config.settings import SettingsError
from dsmo.runtime.exits import hard_exit
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.events.resume_events import EVENT_KINDS


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """DSMO: durable, deterministic, auditable agent executions on Temporal.

    Exit codes: 0 ok, 1 error, 2 usage. Tab completion (bash):
    eval "$(_DSMO_COMPLETE=bash_source dsmo)"
    """
    ctx.obj = Context(debug)


# -- runs -----------------------------------------------------------------------------------


@cli.command()
@click.argument("run_id")
@click.argument("text")
@click.option("--event-id", help="Idempotency id of this reply (default: random).")
@pass_context
def respond(obj: Context, run_id: str, text: str, event_id: str | None) -> None:
    """Deliver a user's reply (MESSAGE_RECEIVED) to a run; kept for its wait if it arrives early.

    \b
    Example:
      dsmo respond ana-1 "Sí, sigo interesada" --event-id whatsapp-msg-981
    """

    async def go() -> Any:
        client = await obj.client()
        return await client.respond(run_id, text, event_id=event_id)

    ack = run(go)
    click.echo(ack_line(ack, run_id))


@cli.command()
@click.argument("run_id")
@click.option("--type", "event_type", type=click.Choice(sorted(EVENT_KINDS)), help="Send this resume event.")
@click.option("--data", "data_json", default="{}", help="The event's fields as a JSON object (with --type).")
@click.option("--event-id", help="Idempotency id of the event (with --type; default: random).")
@click.option("--signal", "as_signal", is_flag=True, help="Send as a fire-and-forget signal, not the update.")
@click.option("--json", "as_json", is_flag=True, help="Print the audit events as JSON lines.")
@click.option("--inbox", "inbox_only", is_flag=True, help="Only the events kept, taken, expired or refused.")
@trail_options
@pass_context
def events(
    obj: Context,
    run_id: str,
    event_type: str | None,
    data_json: str,
    event_id: str | None,
    as_signal: bool,
    as_json: bool,
    inbox_only: bool,
    limit: int,
    after: int | None,
    before: int | None,
    show_all: bool,
) -> None:
    """Show a run's audit trail, or with --type deliver a resume event to it.

    An event that arrives before the run waits for it is kept in the run's inbox
    (EVENT_BUFFERED) and taken by the first wait that accepts it (EVENT_CONSUMED); --inbox
    shows that story alone.

    \b
    Examples:
      dsmo events ana-1                      # the latest 100 events
      dsmo events ana-1 --after 0 --limit 50 # the first 50; then --after 50
      dsmo events ana-1 --all --json         # the whole trail
      dsmo events ana-1 --inbox
      dsmo events ana-1 --type DOCUMENT_UPLOADED --data '{"document": "id_card", "url": "s3://docs/id.pdf"}'
    """
    if event_type is None:
        # Options that only shape an event would be dropped in silence: nothing would be sent.
        for option, given in (("--data", data_json != "{}"), ("--event-id", event_id), ("--signal", as_signal)):
            if given:
                raise click.UsageError(f"{option}: give it with --type (the event to deliver); nothing was sent")
        paging = {"limit": limit, "after": after, "before": before, "show_all": show_all}
        return print_trail(obj, run_id, as_json=as_json, inbox_only=inbox_only, paging=paging)
    data = json_object(data_json, "--data")
    chosen = event_id or str(uuid.uuid4())

    async def deliver() -> Any:
        client = await obj.client()
        if as_signal:
            return await client.signal_event(run_id, event_type, {"event_id": chosen, **data})
        return await client.deliver_event(run_id, event_type, data, event_id=chosen)

    ack = run(deliver)
    if as_signal:
        click.echo(f"signalled: {event_type} {chosen} to {run_id} (see `dsmo events {run_id}` for the outcome)")
    else:
        click.echo(ack_line(ack, run_id, event_type))


@cli.command()
@click.argument("run_id", required=False)
@click.option("--reason", required=True, help="Why the run is cancelled (kept in its record).")
@click.option("--by", "cancelled_by", default="user", show_default=True, help="Who cancels it.")
@click.option("--query", help="Cancel every live run matching this visibility query (with a progress bar).")
@pass_context
def cancel(obj: Context, run_id: str | None, reason: str, cancelled_by: str, query: str | None) -> None:
    """Cancel a run that has not ended (pending, running or waiting), or many with --query.

    \b
    Examples:
      dsmo cancel ana-1 --reason "candidate withdrew"
      dsmo cancel --query "AgentName='candidate-screening' AND WaitingFor='response'" --reason "campaign closed"
    """
    if (run_id is None) == (query is None):
        raise click.UsageError("give either RUN_ID or --query")
    given_query(query)
    # Before the progress bar draws: a refused batch leaves nothing but its one line.
    required_reason(reason, "the run is cancelled" if query is None else "the runs are cancelled")
    if query is not None:
        from dsmo.cli.bulk import cancel_matching

        done, failed = run(lambda: cancel_matching(obj.settings, query, reason=reason, by=cancelled_by))
        click.echo(f"cancelled {done} run(s)" + (f", {failed} could not be cancelled" if failed else ""))
        if failed:
            sys.exit(1)
        return
    assert run_id is not None

    from dsmo.cli.bulk import cancel_one

    click.echo(run(lambda: cancel_one(obj, run_id, reason=reason, by=cancelled_by)))


cli.add_command(start)
cli.add_command(status)
cli.add_command(decide)
cli.add_command(hooks)
cli.add_command(mcp)
operations.register(cli)
catalog.register(cli)
project.register(cli)
recovery.register(cli)
subjects_command.register(cli)
serve.register(cli)
add_examples(cli)


def main(argv: list[str] | None = None) -> None:
    """Entry point: one-line errors and a non-zero exit; tracebacks only with --debug."""
    code = 0
    try:
        _main(sys.argv[1:] if argv is None else argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    hard_exit(code)


def _main(args: list[str]) -> None:
    debug = "--debug" in args
    try:
        cli.main(args=args, prog_name="dsmo", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except (DsmoError, SettingsError) as err:
        if debug:
            raise
        click.echo(f"error: {err}", err=True)
        sys.exit(1)
    except Exception as err:
        if debug:
            raise
        click.echo(f"error: {type(err).__name__}: {err} (run with --debug for details)", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
