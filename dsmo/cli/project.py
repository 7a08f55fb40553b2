"""`dsmo init`: scaffold a user project."""

from __future__ import annotations

from pathlib import Path

import click

from dsmo.scaffold.new_project import project_names, scaffold


def register(cli: click.Group) -> None:
    cli.add_command(init)


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", help="Project name (default: the folder's name); gives the package and agent names.")
@click.option(
    "--template",
    type=click.Choice(["agent", "tools"]),
    default="agent",
    show_default=True,
    help="agent: a processor and a graph routing on its summary; tools: a support agent whose model calls tools.",
)
def init(directory: Path, name: str | None, template: str) -> None:
    """Create a project in DIRECTORY: an agent, its unit test, a definition and the plugin entry point.

    \b
    Example:
      dsmo init ticket-desk && cd ticket-desk && pip install -e '.[dev]' && python -m pytest
      dsmo init support-desk --template tools
    """
    written = scaffold(directory, name, template)
    names = project_names(name or directory.resolve().name)
    made = f"agent {names.agent}" if template == "agent" else f"a support agent {names.slug} and its tools"
    click.echo(f"created {directory}/ with {made}:")
    for path in written:
        click.echo(f"  {path}")
    click.echo("next, in a virtualenv (README.md says more):")
    click.echo(f"  cd {directory} && pip install -e '.[dev]'")
    click.echo("  python -m pytest")
    if template == "tools":
        click.echo("  export DSMO_LLM_BASE_URL=... DSMO_LLM_API_KEY=...   # the model the agent asks")
    sample = _SAMPLES[template]
    click.echo(f"  dsmo dev up --worker && dsmo start definitions/{names.slug}.yaml --wait --input '{sample}'")


_SAMPLES = {
    "agent": '{"subject": "Checkout is down"}',
    "tools": '{"ticket": {"text": "My parcel arrived broken", "order": "A-1"}}',
}
