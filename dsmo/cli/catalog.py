"""`dsmo definitions` and `dsmo agents`: what can run — published definitions and the workers' plugins."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from temporalio.service import RPCError

from dsmo.cli.click_context import Context, pass_context, run
from dsmo.client.client_errors import NotOffered
from dsmo.client.definition_files import load_definition
from dsmo.client.definitions_client import Published
from dsmo.workflows.common.errors import DsmoError


def register(cli: click.Group) -> None:
    for command in (definitions, agents):
        cli.add_command(command)


# -- definitions ----------------------------------------------------------------------------


@click.group()
def definitions() -> None:
    """Validate, publish and draw agent definitions."""


@definitions.command("validate")
@click.argument("definition_file", type=click.Path(dir_okay=False))
def definitions_validate(definition_file: str) -> None:
    """Check a definition file; prints its workflow_version."""
    definition = load_definition(definition_file)
    click.echo(f"valid: {definition.agent} {definition.version} workflow_version {definition.workflow_version}")


@definitions.command("publish")
@click.argument("definition_file", type=click.Path(dir_okay=False))
@pass_context
def definitions_publish(obj: Context, definition_file: str) -> None:
    """Validate, snapshot to configs/{workflow_version}.json and make it the agent's latest."""
    definition = load_definition(definition_file)

    async def publish() -> Published:
        return await (await obj.client(lazy=True)).definitions.publish(definition)

    try:
        published = run(publish)
    except NotOffered as err:
        raise click.ClickException(f"{definition_file}: {err}") from None
    if published.unchecked:
        click.echo(f"warning: {published.unchecked}", err=True)
    click.echo(f"published {definition.agent} workflow_version {definition.workflow_version} -> {published.uri}")


@definitions.command("graph")
@click.argument("definition_file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["svg", "mermaid"]), default="svg", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write to this file (default: standard output).")
@click.option(
    "--diff",
    "old_file",
    type=click.Path(dir_okay=False),
    help="An earlier version of the definition: draw both, marking what was added, removed or changed.",
)
def definitions_graph(definition_file: str, fmt: str, output: str | None, old_file: str | None) -> None:
    """Draw a definition's graph: SVG (layered layout) or Mermaid text, for docs and pull requests.

    \b
    Examples:
      dsmo definitions graph examples/onboarding.yaml -o onboarding.svg
      dsmo definitions graph examples/onboarding.yaml --format mermaid
      dsmo definitions graph new.yaml --diff old.yaml -o change.svg
    """
    from dsmo.server.console import graph, graph_diff

    definition = load_definition(definition_file)
    summary = f"{fmt}, {len(definition.nodes)} nodes"
    if old_file is not None:
        if fmt != "svg":
            raise click.UsageError("--diff: draws SVG only (use --format svg)")
        old = load_definition(old_file)
        changes = graph_diff.diff(old, definition)
        drawn = graph_diff.diff_svg(old, definition)
        summary = (
            f"svg diff: +{len(changes.added_nodes)} -{len(changes.removed_nodes)} "
            f"~{len(changes.changed_nodes)} nodes, +{len(changes.added_edges)} -{len(changes.removed_edges)} edges"
        )
    else:
        drawn = graph.svg(definition) if fmt == "svg" else graph.mermaid(definition)
    if output is None:
        click.echo(drawn, nl=False)
    else:
        Path(output).write_text(drawn, encoding="utf-8")
        click.echo(f"wrote {output} ({summary})")


@definitions.command("schema")
@click.option(
    "--request", "request", is_flag=True, help="The workflow start request (for `temporal workflow start`) instead."
)
def definitions_schema(request: bool) -> None:
    """Print the JSON Schema of an agent definition, or of the request that starts a run.

    \b
    Example:
      dsmo definitions schema > definition.schema.json
      dsmo definitions schema --request
    """
    from dsmo.client.wire_schemas import definition_schema, start_request_schema

    click.echo(json.dumps(start_request_schema() if request else definition_schema(), indent=2))


# -- agents ---------------------------------------------------------------------------------


@click.group()
def agents() -> None:
    """The processors a `run_agent` node can name."""


@agents.command("list")
@click.option("--json", "as_json", is_flag=True, help="Agents (with JSON Schemas), actions and channels as JSON.")
@click.option("--local", is_flag=True, help="What this process's plugins offer, not the running workers'.")
@click.option(
    "--markdown",
    "as_markdown",
    is_flag=True,
    help="A reference page of the agents the plugins loaded here offer (entry points and DSMO_LOAD).",
)
@pass_context
def agents_list(obj: Context, as_json: bool, local: bool, as_markdown: bool) -> None:
    """What the running workers offer: agents (what each reads, the summary it returns), actions, channels.

    Workers publish their catalog to the artifact store when they start; this reads the
    catalogs of the workers polling the task queue now. With no worker polling, or with
    --local, it shows what the plugins loaded here (entry points and DSMO_LOAD) offer.

    \b
    Example:
      dsmo agents list
      dsmo agents list --json | jq '.agents[] | select(.name == "text-extract") | .summarySchema'
    """
    from dsmo.client.agent_catalog import loaded_catalog, markdown

    if as_markdown:
        click.echo(markdown(loaded_catalog(obj.settings.worker.load)), nl=False)
        return
    offer = None
    if not local:
        offer, unknown = _workers_offer(obj)
        if offer is None:
            click.echo(f"# {unknown}: showing the plugins loaded here", err=True)
    if offer is None:
        offer = loaded_catalog(obj.settings.worker.load)
    if as_json:
        click.echo(json.dumps(offer, indent=2))
        return
    for row in offer["agents"]:
        summary = ", ".join((row["summarySchema"] or {}).get("properties", {}))
        click.echo(f"agent    {row['name']:<18} {row['version']:<7} {row['mode']:<5} summary: {summary or '-'}")
        click.echo(f"{'':<41} {row['description']}")
    for row in offer["actions"]:
        click.echo(f"action   {row['name']:<18} {'compensatable' if row['compensatable'] else ''}")
    for row in offer["channels"]:
        click.echo(f"channel  {row['name']}")


def _workers_offer(obj: Context) -> tuple[dict[str, Any] | None, str]:
    """The running workers' catalog, or None and why it is unknown."""

    async def read() -> dict[str, Any] | None:
        return await (await obj.client()).definitions.catalog()

    try:
        offer = run(read)
    except (DsmoError, RPCError) as err:
        return None, f"Temporal cannot be reached ({str(err).splitlines()[0] if str(err) else type(err).__name__})"
    if offer is None:
        return None, f"no worker polls {obj.settings.temporal.task_queue}"
    return offer, ""
