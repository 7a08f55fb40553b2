"""`dsmo status`: a run's status, its wait or its terminal record, and the runs forked from it."""

from __future__ import annotations

import json
from typing import Any

import click

from dsmo.cli.click_context import Context, pass_context, run
from dsmo.cli.render import status_lines
from dsmo.client.client_errors import RunNotFound


@click.command()
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the status structure as JSON.")
@pass_context
def status(obj: Context, run_id: str, as_json: bool) -> None:
    """Show a run's status (the seed's WAITING structure and the terminal record).

    A run Temporal no longer has (its data subject erased, or past retention) is shown from the
    audit trail it exported, and says so.
    A run Temporal closed around DSMO (`temporal workflow terminate`, a workflow run timeout)
    is shown `cancelled` or `timeout`, with how Temporal ended it.

    \b
    Example:
      dsmo status ana-1 --json
    """

    async def go() -> Any:
        client = await obj.client()
        try:
            view = await client.status(run_id)
        except RunNotFound:
            # Its history is gone (erased, or past retention): the trail it exported still tells it,
            # as the console shows it. No trail either: RunNotFound stands.
            view = (await client.run(run_id).from_export())[0]
        try:
            forked = await client.forks(run_id)
        except Exception:  # noqa: BLE001 - the store's list is extra here: the status stands without it
            forked = []
        return view, forked

    view, forked = run(go)
    if as_json:
        click.echo(json.dumps({**view.model_dump(mode="json"), "forks": forked}, indent=2, ensure_ascii=False))
    else:
        click.echo("\n".join(status_lines(view, run_url=obj.settings.temporal.run_url(run_id))))
        for fork in forked:  # the runs forked from this one (`dsmo runs fork`)
            click.echo(f"{'fork':<10} {fork['forkId']} (live from {fork['fromNode']})")
