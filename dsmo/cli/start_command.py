"""`dsmo start`: start a run of a definition file or a published agent, and maybe wait for its end."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import Any

import click

from dsmo.cli.click_context import Context, json_object, pass_context, run
from dsmo.client.definition_files import load_definition, names_agent
from dsmo.client.flow_starts import StartReport
from dsmo.workflows.common.durations import parse_duration
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import ExecutionResult
from dsmo.workflows.definition.model import AgentDefinition


@click.command()
@click.argument("definition_file", metavar="DEFINITION_FILE|AGENT", type=click.Path(dir_okay=False))
@click.option("--input", "input_json", default="{}", help="The run's input variables as a JSON object.")
@click.option(
    "--version", help="With an AGENT name: the published version to run, its hash or label (default: the latest)."
)
@click.option("--id", "run_id", help="Run id (default: <agent>-<random>). Never reused.")
@click.option("--task-queue", help="Task queue (default: DSMO_TASK_QUEUE or agent-executions).")
@click.option("--delay", "delay_text", help="Start later (e.g. 10m, 2h); the run is pending until then.")
@click.option(
    "--priority",
    type=click.IntRange(1, 5),
    help="1 (highest) to 5: ahead of lower ones on the task queue and in a key's line.",
)
@click.option("--wait", is_flag=True, help="Wait for the run to end, print how; exit 1 unless it completed.")
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@pass_context
def start(
    obj: Context,
    definition_file: str,
    input_json: str,
    version: str | None,
    run_id: str | None,
    task_queue: str | None,
    delay_text: str | None,
    priority: int | None,
    wait: bool,
    as_json: bool,
) -> None:
    """Start a run of the definition in DEFINITION_FILE, or of AGENT's published one (latest or --version).

    \b
    Example:
      dsmo start examples/candidate_screening.yaml --input '{"candidate": {"name": "Ana", "phone": "+34 600"}}'
    """
    by_name = names_agent(definition_file)
    if version is not None and not by_name:
        raise click.UsageError("--version: give it with an AGENT name, not with a DEFINITION_FILE")
    loaded = None if by_name else load_definition(definition_file)
    variables = json_object(input_json, "--input")
    delay = _duration(delay_text, "--delay") if delay_text else None

    async def go() -> tuple[AgentDefinition, StartReport, ExecutionResult | None]:
        client = await obj.client()
        # --version: a hash or a `version` label, as migrate, fork and replay take it.
        definition = loaded or await (
            client.definitions.resolve(definition_file, version) if version else client.definition(definition_file)
        )
        if definition.debounce is not None:  # named as the options are, not as the client's arguments
            for option, given in (("--id", run_id), ("--delay", delay)):
                if given:
                    raise DsmoError(f"{option}: a debounced definition's start takes none; its batch's run has its own")
        handle = await client.start(
            definition, variables, run_id=run_id, task_queue=task_queue, start_delay=delay, priority=priority
        )
        # The handle's result: a debounced start's run is waited for until its batch starts it.
        return definition, handle.started, (await handle.result() if wait else None)

    definition, report, result = run(go)
    started = report.run_id
    if as_json:
        shown: dict[str, Any] = {
            "runId": started,
            "workflowVersion": definition.workflow_version,
            "url": obj.settings.temporal.run_url(started),
            "status": report.status,
        }
        if definition.concurrency:
            shown.update(queuedBehind=report.queued_behind, ahead=report.ahead, cancelled=report.cancelled)
        if report.status == "debounced":
            shown.update(gathered=report.gathered)
        if result is not None:
            shown.update(result.model_dump(mode="json", by_alias=True, include={"status", "path", "error_message"}))
        click.echo(json.dumps(shown))
    else:
        if report.status == "debounced":  # nothing started yet: the batch's run starts once its key is quiet
            click.echo(f"joined the batch of run {started} ({definition.agent}, start {report.gathered} of it)")
        else:
            click.echo(f"started {started} ({definition.agent}, workflow_version {definition.workflow_version})")
        if report.queued_behind:  # a concurrency key's slot is taken: the run waits in line
            click.echo(f"pending in line for {report.queued_behind} ({report.ahead} ahead)")
        if report.cancelled:
            click.echo(f"cancelled {', '.join(report.cancelled)} (onBusy: cancel-previous)")
        click.echo(f"web UI  {obj.settings.temporal.run_url(started)}")
        if result is not None:
            click.echo(f"{result.status.value} path {' -> '.join(result.path) or '(none)'}")
            if result.error_message:
                click.echo(f"error   {result.error_message}")
    if result is not None and result.status != RunStatus.COMPLETED:
        sys.exit(1)


def _duration(text: str, option: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as err:
        raise DsmoError(f"{option}: {err}") from None
