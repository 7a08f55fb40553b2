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
def init(directory: Path, name: str | None) -> None:
    """Create a project in DIRECTORY: an agent, its unit test, a definition and the plugin entry point.

    \b
    Example:
      dsmo init ticket-desk && cd ticket-desk && pip install -e '.[dev]' && python -m pytest
    """
    written = scaffold(directory, name)
    names = project_names(name or directory.resolve().name)
    click.echo(f"created {directory}/ with agent {names.agent}:")
    for path in written:
        click.echo(f"  {path}")
    click.echo("next, in a virtualenv (README.md says more):")
    click.echo(f"  cd {directory} && pip install -e '.[dev]'")
    click.echo("  python -m pytest")
    click.echo(f"  dsmo dev up --worker && dsmo start definitions/{names.slug}.yaml --wait --input '{_SAMPLE}'")


_SAMPLE = '{"subject": "Checkout is down"}'
