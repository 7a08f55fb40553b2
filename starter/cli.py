"""`dsmo`: the command line for people and scripts."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from starter.client import DsmoClient
from starter.definitions import load_definition
from starter.devstack import DevStack
from starter.render import event_lines, stack_lines, status_lines
from starter.settings import Settings, SettingsError
from workflows.errors import DsmoError

T = TypeVar("T")


class Context:
    def __init__(self, debug: bool) -> None:
        self.debug = debug
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = Settings.from_env()
        return self._settings

    async def client(self) -> DsmoClient:
        return await DsmoClient.connect(self.settings)


pass_context = click.make_pass_decorator(Context)


def run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(_call(coro_fn))


async def _call(coro_fn: Callable[[], Awaitable[T]]) -> T:
    return await coro_fn()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """DSMO: durable, deterministic, auditable agent executions on Temporal."""
    ctx.obj = Context(debug)


# -- the embedded stack ---------------------------------------------------------------------


@cli.group()
def dev() -> None:
    """Start, check and stop the embedded stack (Temporal dev server + SeaweedFS S3)."""


@dev.command("up")
@click.option("--worker", "with_worker", is_flag=True, help="Also start a background worker.")
@click.option("--timeout", default=60.0, show_default=True, help="Seconds to wait for each service.")
@pass_context
def dev_up(obj: Context, with_worker: bool, timeout: float) -> None:
    """Start the stack (idempotent: a running stack is found and reused)."""
    stack = DevStack(obj.settings)
    reports = run(lambda: stack.up(with_worker=with_worker, timeout=timeout))
    click.echo("\n".join(stack_lines(reports)))
    click.echo(f"state and logs in {obj.settings.state_dir}")


@dev.command("down")
@pass_context
def dev_down(obj: Context) -> None:
    """Stop what `dsmo dev up` started (by pid file); anything else is left running."""
    click.echo("\n".join(stack_lines(DevStack(obj.settings).down())))


@dev.command("status")
@pass_context
def dev_status(obj: Context) -> None:
    """Show whether each service is running and healthy."""
    reports = run(lambda: DevStack(obj.settings).status())
    click.echo("\n".join(stack_lines(reports)))
    if not all(report.up for report in reports):
        sys.exit(1)


@cli.command()
def worker() -> None:
    """Run a worker in the foreground (same as `python worker.py`)."""
    import worker as worker_module

    worker_module.main()


# -- runs -----------------------------------------------------------------------------------


@cli.command()
@click.argument("definition_file", type=click.Path(dir_okay=False))
@click.option("--input", "input_json", default="{}", help="The run's input variables as a JSON object.")
@click.option("--id", "run_id", help="Run id (default: <agent>-<random>). Never reused.")
@click.option("--task-queue", help="Task queue (default: DSMO_TASK_QUEUE or agent-executions).")
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@pass_context
def start(
    obj: Context, definition_file: str, input_json: str, run_id: str | None, task_queue: str | None, as_json: bool
) -> None:
    """Start a run of the agent definition in DEFINITION_FILE."""
    definition = load_definition(definition_file)
    variables = _json_object(input_json, "--input")

    async def go() -> str:
        client = await obj.client()
        return await client.start(definition, variables, run_id=run_id, task_queue=task_queue)

    started = run(go)
    if as_json:
        click.echo(
            json.dumps(
                {"runId": started, "workflowVersion": definition.workflow_version, "url": obj.settings.run_url(started)}
            )
        )
    else:
        click.echo(f"started {started} ({definition.agent}, workflow_version {definition.workflow_version})")
        click.echo(f"web UI  {obj.settings.run_url(started)}")


@cli.command()
@click.argument("run_id")
@click.argument("text")
@click.option("--event-id", help="Idempotency id of this reply (default: random).")
@pass_context
def respond(obj: Context, run_id: str, text: str, event_id: str | None) -> None:
    """Deliver a user's reply (MESSAGE_RECEIVED) to a run waiting for a response."""

    async def go() -> Any:
        client = await obj.client()
        return await client.respond(run_id, text, event_id=event_id)

    ack = run(go)
    click.echo(f"{'duplicate, ignored' if ack.duplicate else 'delivered'}: {ack.event_id} to {run_id}")


@cli.command()
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the status structure as JSON.")
@pass_context
def status(obj: Context, run_id: str, as_json: bool) -> None:
    """Show a run's status (the seed's WAITING structure and the terminal record)."""

    async def go() -> Any:
        client = await obj.client()
        return await client.status(run_id)

    view = run(go)
    if as_json:
        click.echo(view.model_dump_json(indent=2))
    else:
        click.echo("\n".join(status_lines(view, run_url=obj.settings.run_url(run_id))))


@cli.command()
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON lines.")
@pass_context
def events(obj: Context, run_id: str, as_json: bool) -> None:
    """Show a run's audit trail."""

    async def go() -> Any:
        client = await obj.client()
        return await client.events(run_id)

    trail = run(go)
    if as_json:
        for event in trail:
            click.echo(event.model_dump_json())
    else:
        click.echo("\n".join(event_lines(trail)))


def _json_object(text: str, option: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as err:
        raise DsmoError(f"{option}: not valid JSON ({err})") from None
    if not isinstance(value, dict):
        raise DsmoError(f"{option}: must be a JSON object, not {type(value).__name__}")
    return value


def main(argv: list[str] | None = None) -> None:
    """Entry point: one-line errors and a non-zero exit; tracebacks only with --debug."""
    args = sys.argv[1:] if argv is None else argv
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
