"""`dsmo runs fork`: a new linked run that redoes a run from one of its nodes, keeping what came before."""

from __future__ import annotations

import click

from dsmo.cli.click_context import Context, pass_context, run
from dsmo.cli.migrate_command import node_map_of
from dsmo.client.run_corrections import assignments_of


@click.command("fork")
@click.argument("run_id")
@click.option("--from", "from_node", required=True, help="The node the fork runs live from (one the run reached).")
@click.option(
    "--set", "sets", multiple=True, metavar="VAR=VALUE", help="Correct a variable there (VALUE as JSON, else text)."
)
@click.option("--version", "version", help="Fork onto this published version (its hash or `version` label).")
@click.option("--map", "maps", multiple=True, metavar="OLD:NEW", help="With --version: a renamed node.")
@click.option("--map-file", type=click.Path(exists=True, dir_okay=False), help="With --version: {old: new, ...}.")
@click.option("--id", "new_id", help="The fork's run id (default: ROOT.fork-<random>; ROOT: the chain's first run).")
@click.option("--task-queue", help="The fork's task queue (default: DSMO_TASK_QUEUE).")
@pass_context
def fork(
    obj: Context,
    run_id: str,
    from_node: str,
    sets: tuple[str, ...],
    version: str | None,
    maps: tuple[str, ...],
    map_file: str | None,
    new_id: str | None,
    task_queue: str | None,
) -> None:
    """Start a new run that redoes RUN_ID from --from, keeping what happened before it.

    Before --from the fork takes the run's record: stages reuse their committed outputs (no
    agent is called), waits take the events the run took, saga actions their recorded
    outcomes, and nothing is sent to anyone. From --from on it runs live, with the --set
    corrections. RUN_ID may have ended or still run; it is not touched.
    """
    if version is None and (maps or map_file):
        # Without --version the fork stays on the run's own version: no node of it is renamed.
        option = "--map" if maps else "--map-file"
        raise click.UsageError(f"{option}: only with --version (a renamed node of the version the fork goes onto)")
    corrections = assignments_of(sets)
    node_map = node_map_of(maps, map_file)

    async def start() -> str:
        client = await obj.client()
        return await client.fork(
            run_id,
            from_node,
            set_variables=corrections,
            to=version,
            node_map=node_map,
            new_id=new_id,
            task_queue=task_queue,
        )

    forked = run(start)
    click.echo(f"forked {run_id} from {from_node} as {forked}")
