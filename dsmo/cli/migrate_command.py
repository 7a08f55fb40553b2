"""`dsmo runs migrate`: move an agent's open runs to another published version, checked run by run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import click
import yaml

from dsmo.cli.bulk_commands import batch_flags, run_batch_command
from dsmo.cli.click_context import Context, pass_context
from dsmo.client.batches import BatchReport, RunOutcome
from dsmo.client.definition_files import load_definition, yaml_problem
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.migration import selection
from dsmo.client.run_corrections import assignments_of
from dsmo.client.run_selection import Scope
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.definition.model import AgentDefinition


@click.command("migrate")
@click.argument("agent")
@click.option("--from", "from_version", help="Only runs on this version (its hash or its `version` label).")
@click.option(
    "--to", "to", required=True, help="The target: a published version (hash or label), or a definition FILE."
)
@click.option(
    "--map", "maps", multiple=True, metavar="OLD:NEW", help="A renamed node: OLD of the runs' version is NEW."
)
@click.option("--map-file", type=click.Path(exists=True, dir_okay=False), help="A YAML/JSON file {old: new, ...}.")
@click.option(
    "--set", "sets", multiple=True, metavar="VAR=VALUE", help="Set a variable as runs move (VALUE as JSON, else text)."
)
@click.option("--leave-wait", is_flag=True, help="Let a waiting run leave its wait for a mapped node of another kind.")
@click.option(
    "--restart-timers", is_flag=True, help="Start each wait's timeout afresh instead of keeping its deadline."
)
@click.option("--reason", default="", help="Why, recorded in each run's trail.")
@click.option("--by", "by", default="user", show_default=True, help="Who asks, recorded beside the reason.")
@click.option("--query", help="A Temporal visibility filter AND-ed to the selection (e.g. WaitingFor = 'document').")
@batch_flags
@pass_context
def migrate(
    obj: Context,
    agent: str,
    from_version: str | None,
    to: str,
    maps: tuple[str, ...],
    map_file: str | None,
    sets: tuple[str, ...],
    leave_wait: bool,
    restart_timers: bool,
    reason: str,
    by: str,
    query: str | None,
    dry_run: bool,
    rate: float | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """Move AGENT's open runs to another published version, each checked by the run first.

    A waiting run moves at once and goes on waiting at the mapped node (a node maps to the node
    with the same id unless --map says otherwise); a run inside a stage moves at its next node.
    A run the move does not fit is `refused` with the reason, and nothing is written to it. The
    same command again skips the runs already moved. --to FILE publishes the file first (not in
    a dry run, which checks against the file as it is).
    """
    node_map = node_map_of(maps, map_file)
    variables = assignments_of(sets)

    def go(client: DsmoClient, on_outcome: Callable[[RunOutcome], None]) -> Awaitable[BatchReport]:
        async def batch() -> BatchReport:
            target = to if not Path(to).is_file() else load_definition(to)  # else a version, by hash or label
            return await client.migrate(
                agent,
                target,
                publish=isinstance(target, AgentDefinition),
                from_version=from_version,
                query=query,
                node_map=node_map,
                leave_wait=leave_wait,
                restart_timers=restart_timers,
                set_variables=variables,
                reason=reason,
                by=by,
                dry_run=dry_run,
                rate=rate,
                limit=limit,
                on_outcome=on_outcome,
            )

        return batch()

    # The progress bar's total: the agent's open runs the filter selects (before --from narrows them).
    run_batch_command(
        obj, "migrate", selection(agent, None, query), None, go, limit=limit, as_json=as_json, runs=Scope.OPEN
    )


def node_map_of(maps: tuple[str, ...], map_file: str | None) -> dict[str, str]:
    """The node map of --map OLD:NEW options and a --map-file, or one line naming what is wrong."""
    node_map: dict[str, str] = {}
    if map_file:
        try:
            loaded = yaml.safe_load(Path(map_file).read_text())
        except yaml.YAMLError as err:
            raise DsmoError(f"--map-file: {map_file} is not valid YAML/JSON ({yaml_problem(err)})") from None
        if not isinstance(loaded, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in loaded.items()
        ):
            raise DsmoError(f"--map-file: {map_file} must map node ids to node ids ({{old: new, ...}})")
        node_map.update(loaded)
    for entry in maps:
        old, sep, new = entry.partition(":")
        if not sep or not old or not new:
            raise DsmoError(f"--map: {entry!r} is not OLD:NEW")
        node_map[old] = new
    return node_map
