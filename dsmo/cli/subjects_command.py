"""`dsmo subjects`: a data subject's runs, erasing a subject, and the erasure log."""

from __future__ import annotations

import json
from typing import Any

import click

from dsmo.cli.click_context import Context, pass_context, run
from dsmo.client.erasure import ErasureReport


def register(cli: click.Group) -> None:
    cli.add_command(subjects)


@click.group()
def subjects() -> None:
    """Data subjects: whom runs are about (a definition's `subject`), and erasing them."""


@subjects.command("erase")
@click.argument("subject")
@click.option("--reason", required=True, help="Why the subject is erased (kept in the erasure log).")
@click.option("--by", default="cli", show_default=True, help="Who erases it (kept in the erasure log).")
@click.option("--cancel-runs", is_flag=True, help="Cancel the subject's open runs first (their sagas compensate).")
@click.option("--dry-run", is_flag=True, help="Only list what would be erased.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_context
def erase(obj: Context, subject: str, reason: str, by: str, cancel_runs: bool, dry_run: bool, as_json: bool) -> None:
    """Erase SUBJECT: destroy its key (its stored data becomes unreadable), delete its runs'
    histories, and append a record to the erasure log. Open runs refuse it unless --cancel-runs.
    """

    async def go() -> ErasureReport:
        client = await obj.client()
        return await client.erase_subject(subject, reason=reason, by=by, cancel_runs=cancel_runs, dry_run=dry_run)

    report = run(go)
    if as_json:
        click.echo(json.dumps(_as_json(report)))
        return
    plan = report.plan
    verb = "would erase" if report.dry_run else "erased"
    key = "its key" if plan.key_exists else "no key (erased before, or never used)"
    click.echo(f"{verb} subject {plan.fingerprint}: {len(plan.runs)} run(s), {key}")
    for subject_run in plan.runs:
        state = "open" if subject_run.open else "ended"
        cancel = "  (cancelled first)" if subject_run.run_id in report.cancelled else ""
        click.echo(f"  {subject_run.run_id}  {subject_run.agent}  {subject_run.status}  {state}{cancel}")
    if report.dry_run:
        if plan.open_runs:
            click.echo(f"{len(plan.open_runs)} open run(s): erasing needs --cancel-runs")
        return
    assert report.record is not None
    click.echo(f"histories deleted: {report.histories_deleted}; erasure log record #{report.record['seq']}")
    if report.histories_pending:
        click.echo(
            f"deletion requested, still served by Temporal: {', '.join(report.histories_pending)} "
            "(erase again later to check)"
        )


@subjects.command("log")
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON lines.")
@pass_context
def log(obj: Context, as_json: bool) -> None:
    """The erasure log: every erasure, oldest first (`dsmo audit verify --erasures` checks it)."""

    async def go() -> list[dict[str, Any]]:
        return (await (await obj.client()).erasures())[0]

    for record in run(go):
        if as_json:
            click.echo(json.dumps(record))
        else:
            click.echo(
                f"#{record['seq']}  {record['at']}  {record['subject']}  by {record['by']}: {record['reason']}  "
                f"({len(record['runs'])} runs)"
            )


def _as_json(report: ErasureReport) -> dict[str, Any]:
    plan = report.plan
    return {
        "dryRun": report.dry_run,
        "subject": plan.fingerprint,
        "keyExists": plan.key_exists,
        "runs": [
            {"runId": r.run_id, "agent": r.agent, "status": r.status, "open": r.open, "executions": r.executions}
            for r in plan.runs
        ],
        "openRuns": plan.open_runs,
        "cancelled": report.cancelled,
        "historiesDeleted": report.histories_deleted,
        "historiesPending": report.histories_pending,
        "messagesRemoved": report.messages_removed,
        "record": report.record,
    }
