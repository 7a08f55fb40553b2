"""`dsmo runs rewind`: send a waiting run back to an earlier node of its path, with corrections."""

from __future__ import annotations

import json

import click

from dsmo.cli.click_context import Context, pass_context, run
from dsmo.client.run_corrections import assignments_of, rewind_summary
from dsmo.workflows.contracts.rewind_io import RewindAck


@click.command("rewind")
@click.argument("run_id")
@click.option("--to", "to_node", required=True, help="The node to go back to (one on the run's path).")
@click.option(
    "--set", "sets", multiple=True, metavar="VAR=VALUE", help="Correct a variable there (VALUE as JSON, else text)."
)
@click.option("--reason", required=True, help="Why the run goes back, recorded in its trail.")
@click.option(
    "--no-compensate",
    "keep_done",
    is_flag=True,
    help="Leave the saga steps done after the node as they are (recorded) instead of undoing them.",
)
@click.option("--by", "by", default="user", show_default=True, help="Who asks, recorded beside the reason.")
@click.option("--json", "as_json", is_flag=True, help="Print the run's answer as JSON.")
@pass_context
def rewind(
    obj: Context,
    run_id: str,
    to_node: str,
    sets: tuple[str, ...],
    reason: str,
    keep_done: bool,
    by: str,
    as_json: bool,
) -> None:
    """Send RUN_ID, a waiting (or pending) run, back to --to, an earlier node of its path.

    The run enters the node again with its variables as they were when it first entered it,
    plus the --set corrections. The saga steps it did since are undone first, last first, as
    a failure would undo them (--no-compensate leaves them done). What it did after the node
    stays in the store and the trail, no longer current; the trail records RUN_REWOUND. A
    refused rewind writes nothing; a run that has ended is forked instead (dsmo runs fork).
    """
    corrections = assignments_of(sets)

    async def go() -> RewindAck:
        client = await obj.client()
        return await client.rewind(
            run_id, to_node, reason=reason, set_variables=corrections, compensate=not keep_done, by=by
        )

    ack = run(go)
    click.echo(json.dumps(ack.model_dump(mode="json"), ensure_ascii=False) if as_json else rewind_summary(ack))
