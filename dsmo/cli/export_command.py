"""`dsmo runs export RUN -o run.zip`: a run as one archive anyone can check offline."""

from __future__ import annotations

from pathlib import Path

import click

from dsmo.cli.click_context import Context, pass_context, run
from dsmo.client.run_export import RunExport


@click.command("export")
@click.argument("run_id")
@click.option("--children", is_flag=True, help="Include the runs it started, and theirs.")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False), help="The zip to write.")
@pass_context
def export(obj: Context, run_id: str, children: bool, output: str) -> None:
    """Export RUN_ID: its trail, Temporal history, definition snapshots, every stored object still
    readable and the erasure records that touch it, with a manifest of SHA-256 sums.

    `dsmo audit verify --archive FILE` checks the archive with no server.
    """

    async def go() -> RunExport:
        return await (await obj.client()).export(run_id, children=children)

    exported = run(go)
    target = Path(output)
    partial = target.with_name(target.name + ".partial")
    partial.write_bytes(exported.data)
    partial.replace(target)  # whole or not at all
    click.echo(f"wrote {target}: {len(exported.runs)} run(s), {len(exported.data)} bytes")
    click.echo(f"manifest sha256 {exported.manifest_sha256}")
    for uri, why in exported.unreadable.items():
        click.echo(f"  not included  {uri}: {why}")
