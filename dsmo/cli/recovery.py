"""`dsmo replay`, `dsmo verify`, `dsmo dlq`, `dsmo audit` and `dsmo compensations`: tools for what ran."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from dsmo.cli.click_context import Context, pass_context, run
from dsmo.cli.what_if_command import what_if_command
from dsmo.client.compensations import FailedCompensation
from dsmo.client.replay import ReplayReport
from dsmo.client.run_archive import verify_archive
from dsmo.client.trail_store import TrailVerification
from dsmo.workflows.common.errors import DsmoError


def register(cli: click.Group) -> None:
    for command in (replay, verify, dlq, audit, compensations_group):
        cli.add_command(command)


@click.command()
@click.argument("run_id", required=False)
@click.option("--from-stage", help="Reuse the original's committed outputs before this stage; recompute from it on.")
@click.option("--task-queue", help="Task queue of the replay run (default: DSMO_TASK_QUEUE).")
@click.option(
    "--rerun-llm", is_flag=True, help="Call the models again instead of reusing the recorded answers; show changes."
)
@click.option("--query", help="Replay every ended run this visibility filter selects against a candidate (what-if).")
@click.option(
    "--definition",
    "definition_file",
    type=click.Path(exists=True, dir_okay=False),
    help="With --query: the candidate file.",
)
@click.option("--version", help="With --query and --agent: the candidate, a published version (hash or label).")
@click.option("--agent", help="With --version: the agent whose version it is.")
@click.option("--limit", type=click.IntRange(min=1), help="With --query: at most N runs.")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def replay(
    obj: Context,
    run_id: str | None,
    from_stage: str | None,
    task_queue: str | None,
    rerun_llm: bool,
    query: str | None,
    definition_file: str | None,
    version: str | None,
    agent: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """Re-execute a run as a new linked run (same input, version, config) and compare the paths.

    `llm` stages answer from the original's recorded model responses: a replay calls no model
    unless --rerun-llm is given. Every visit of a stage a loop runs again is compared. Exit
    status 2 when the replay could not follow the record (it says why); a replay needs a worker
    polling its task queue (without one it fails at once and starts nothing).

    With --query and a candidate (--definition FILE, or --version V --agent A), every ended run
    the filter selects is replayed against the candidate instead (what-if): per run, the same
    path or where it first diverges, then a summary. Exit status 0 when no path diverged, 1
    when some did, 2 when a run could not be replayed or the filter or candidate is wrong.
    """
    what_if_options = {"--definition": definition_file, "--version": version, "--agent": agent, "--limit": limit}
    _one_way(run_id, from_stage, query, what_if_options)
    if query is not None:
        what_if_command(obj, query, definition_file, version, agent, task_queue, rerun_llm, limit, as_json)
        return
    if run_id is None:
        raise DsmoError("RUN_ID: give a run to replay, or --query with a candidate (what-if)")
    run_id_given: str = run_id

    async def go() -> ReplayReport:
        client = await obj.client()
        return await client.replay(run_id_given, from_stage=from_stage, task_queue=task_queue, rerun_llm=rerun_llm)

    report = run(go)
    if as_json:
        click.echo(json.dumps({**asdict(report), "samePath": report.same_path}))
        if report.problem is not None:
            sys.exit(2)
        return
    click.echo(f"{'step':<5} {report.original:<40} {report.replay}")
    for index in range(max(len(report.original_path), len(report.replay_path))):
        left = report.original_path[index] if index < len(report.original_path) else "-"
        right = report.replay_path[index] if index < len(report.replay_path) else "-"
        mark = "  <- first divergence" if index == report.first_divergence else ""
        click.echo(f"{index + 1:<5} {left:<40} {right}{mark}")
    click.echo(f"{'end':<5} {report.original_status:<40} {report.replay_status}")
    if report.same_path:
        click.echo("same state path")
    for node, (before, after) in report.outputs.items():
        verdict = "same" if before == after else "differs"
        click.echo(f"output {node}: {verdict} ({(before or '-')[:12]} / {(after or '-')[:12]})")
    for node, changes in report.answers.items():
        click.echo(f"answer {node}: {len(changes)} field(s) changed")
        for change in changes:
            click.echo(f"  {change}")
    if report.problem is not None:  # the paths say nothing: the record could not answer the replay
        click.echo(f"error: the replay could not follow the record: {report.problem}", err=True)
        sys.exit(2)


def _one_way(run_id: str | None, from_stage: str | None, query: str | None, what_if: Mapping[str, object]) -> None:
    """Refuse an option of the other way of `dsmo replay` than the one asked: it would be ignored."""
    if query is not None:
        if run_id is not None:
            raise click.UsageError("RUN_ID: not with --query (replay one run, or the runs --query selects)")
        if from_stage is not None:
            raise click.UsageError("--from-stage: not with --query (it replays one run from a stage)")
        return
    for option, value in what_if.items():
        if value is not None:
            raise click.UsageError(f"{option}: only with --query")


@click.command()
@click.argument("run_id")
@pass_context
def verify(obj: Context, run_id: str) -> None:
    """Replay a run's Temporal history on the current code: is it still deterministic?"""

    async def go() -> str | None:
        return await (await obj.client()).verify_history(run_id)

    problem = run(go)
    if problem is None:
        click.echo(f"deterministic: {run_id} replays on the current code")
    else:
        click.echo(f"NOT deterministic: {problem}")
        sys.exit(1)


@click.group()
def dlq() -> None:
    """Dead letters: stages that could not succeed."""


@dlq.command("list")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def dlq_list(obj: Context, as_json: bool) -> None:
    async def go() -> list[Any]:
        return await (await obj.client()).dead_letters()

    rows = run(go)
    if as_json:
        click.echo(json.dumps([asdict(row) for row in rows]))
        return
    for row in rows:
        redriven = f" redriven as {row.redriven_as}" if row.redriven_as else ""
        click.echo(f"{row.id}  {row.error_type}  attempts={row.attempts}  {row.created_at}{redriven}")


@dlq.command("redrive")
@click.argument("letter_id", required=False)
@click.option("--all", "everything", is_flag=True, help="Redrive every dead letter not redriven yet.")
@click.option("--task-queue", help="Task queue (default: the failed run's).")
@pass_context
def dlq_redrive(obj: Context, letter_id: str | None, everything: bool, task_queue: str | None) -> None:
    """Reprocess a dead letter (ID is RUN/STAGE) from its stage, same version and config.

    \b
    Examples:
      dsmo dlq redrive document-triage-1a2b/classify
      dsmo dlq redrive --all
    """
    if everything == (letter_id is not None):
        raise click.UsageError("give either LETTER_ID or --all")
    if everything:
        from dsmo.cli.bulk import redrive_all

        for letter, new_run in run(lambda: redrive_all(obj.settings)):
            click.echo(f"redriving {letter} as {new_run}")
        return
    assert letter_id is not None

    async def go() -> str:
        return await (await obj.client()).redrive(letter_id, task_queue=task_queue)

    click.echo(f"redriving {letter_id} as {run(go)}")


@click.group()
def audit() -> None:
    """The exported audit trail (`audit/{run_id}.jsonl`)."""


@audit.command("verify")
@click.argument("run_id", required=False)
@click.option("--erasures", is_flag=True, help="Check the erasure log's hash chain instead of a run's trail.")
@click.option(
    "--archive", type=click.Path(exists=True, dir_okay=False), help="Check an archive from `dsmo runs export`, offline."
)
@click.option("--manifest-sha256", help="With --archive: the manifest's SHA-256 printed at export, kept elsewhere.")
@pass_context
def audit_verify(
    obj: Context, run_id: str | None, erasures: bool, archive: str | None, manifest_sha256: str | None
) -> None:
    """Check the exported trail's hash chain, and that it matches the run's own trail.

    An erased subject's run still verifies: the artifacts its trail names that can no longer be
    read are listed as erased.
    """
    if [run_id is not None, erasures, archive is not None].count(True) != 1:
        raise click.UsageError("give one of RUN_ID, --erasures or --archive FILE")
    if archive is not None:
        _verify_archive(Path(archive), manifest_sha256)
        return
    if manifest_sha256 is not None:
        raise click.UsageError("--manifest-sha256: only with --archive")

    async def go() -> TrailVerification:
        client = await obj.client()
        if run_id is None:
            return (await client.erasures())[1]
        return await client.verify_trail(run_id)

    result = run(go)
    if result.ok:
        against = " and matches the run's trail" if result.compared else ""
        click.echo(f"ok: {counted(result.lines, 'event')}, hash chain intact{against}")
        if result.erased:
            record = result.erasure or {}
            when = f" on {record['at']} by {record['by']} (erasure #{record['seq']})" if record else ""
            erased = counted(len(result.erased), "artifact")
            click.echo(f"erased: {erased} it refers to; the run's data subject was erased{when}")
            for uri in result.erased:
                click.echo(f"  erased  {uri}")
    else:
        click.echo(f"TAMPERED: {result.problem}")
        sys.exit(1)


@click.group("compensations")
def compensations_group() -> None:
    """Saga compensations whose retries ran out."""


@compensations_group.command("failed")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def compensations_failed(obj: Context, as_json: bool) -> None:
    """List compensations recorded as failed for manual action."""

    async def go() -> list[FailedCompensation]:
        return await (await obj.client()).failed_compensations()

    rows = run(go)
    if as_json:
        click.echo(json.dumps([asdict(row) for row in rows]))
        return
    for row in rows:
        click.echo(f"{row.id}  run={row.run_id} node={row.node} attempts={row.attempts}  {row.last_error}")


@compensations_group.command("retry")
@click.argument("compensation_id")
@pass_context
def compensations_retry(obj: Context, compensation_id: str) -> None:
    """Try a failed compensation once more (ID from `dsmo compensations failed`)."""

    async def go() -> Any:
        return await (await obj.client()).retry_compensation(compensation_id)

    state = run(go)
    click.echo(f"{state.status}: {compensation_id} after {state.attempts} attempts")


def _verify_archive(path: Path, manifest_sha256: str | None) -> None:
    """Check an exported archive with no server: sums, trail chains, erasure records."""
    result = verify_archive(path.read_bytes(), manifest_sha256=manifest_sha256)
    if not result.ok:
        click.echo(f"TAMPERED: {result.problem}")
        sys.exit(1)
    files = counted(result.files, "file")
    click.echo(f"ok: {len(result.runs)} run(s), {files} match the manifest, trails' chains intact")
    for uri, why in result.unreadable.items():
        click.echo(f"  not included  {uri}: {why}")


def counted(number: int, noun: str) -> str:
    """``1 event``, ``2 events``: a count with its noun in the right number."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
