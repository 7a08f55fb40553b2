"""`dsmo replay --query ... --definition FILE | --version V --agent A`: a candidate version tried on
recorded runs, reported per run and in a summary, with an exit status for CI."""

from __future__ import annotations

import json
import sys
from typing import NoReturn

import click

from dsmo.cli.click_context import Context, run
from dsmo.client.batches import RunOutcome
from dsmo.client.client_errors import DefinitionNotFound, InvalidQuery
from dsmo.client.definition_files import load_definition
from dsmo.client.query_errors import given_query
from dsmo.client.what_if import WhatIfReport
from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.definition.model import AgentDefinition

# Exit statuses: every path the same, some diverged, some runs could not be replayed.
SAME, DIVERGED, ERRORS = 0, 1, 2


def what_if_command(
    obj: Context,
    query: str,
    definition_file: str | None,
    version: str | None,
    agent: str | None,
    task_queue: str | None,
    rerun_llm: bool,
    limit: int | None,
    as_json: bool,
) -> None:
    """Replay the runs ``query`` selects against the candidate; print and exit as `dsmo replay` says."""
    if (definition_file is None) == (version is None):
        refused("--query: give the candidate, either --definition FILE or --version V (with --agent)")
    if version is not None and agent is None:
        refused("--agent: required with --version (the agent whose version it is)")
    try:
        given_query(query)
        loaded = load_definition(definition_file) if definition_file is not None else None
    except (InvalidQuery, DefinitionError) as err:
        refused(str(err))

    def on_run(outcome: RunOutcome) -> None:
        click.echo(f"{outcome.run_id}: {outcome.reason}", err=as_json)

    async def go() -> WhatIfReport:
        client = await obj.client()
        candidate: AgentDefinition
        if loaded is not None:
            candidate = loaded
        else:
            assert version is not None and agent is not None
            candidate = await client.definitions.resolve(agent, version)
        return await client.what_if(
            query, candidate, rerun_llm=rerun_llm, limit=limit, task_queue=task_queue, on_run=on_run
        )

    try:
        report = run(go)
    except InvalidQuery as err:
        refused(f"--query: {str(err).removeprefix('query: ')}")
    except DefinitionNotFound as err:  # only the candidate is looked up: --agent or --version names none
        problem = str(err)
        refused(f"--{problem}" if problem.startswith("version: ") else f"--agent: {problem}")
    summary = report.summary()
    if as_json:
        click.echo(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        click.echo(
            f"what-if {report.candidate.agent}@{report.candidate.version}: {summary['runs']} run(s), "
            f"{summary['samePath']} same path, {summary['diverged']} diverged, {summary['errors']} error(s)"
        )
        for point, count in summary["byDivergence"].items():
            click.echo(f"  {count:>5}  diverged {point}")
        for ends, count in summary["byStatus"].items():
            click.echo(f"  {count:>5}  ended {ends}")
    sys.exit(ERRORS if summary["errors"] else DIVERGED if summary["diverged"] else SAME)


def refused(problem: str) -> NoReturn:
    """A wrong filter or candidate: its one line, and the exit status that says so (not a divergence)."""
    click.echo(f"error: {problem}", err=True)
    sys.exit(ERRORS)
