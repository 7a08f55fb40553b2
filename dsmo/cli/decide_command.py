"""`dsmo decide`: approve, edit or reject the tool call a run waits on (`TOOL_DECIDED`)."""

from __future__ import annotations

import getpass
from typing import Any

import click

from dsmo.cli.click_context import Context, json_object, pass_context, run
from dsmo.cli.render import ack_line


@click.command("decide")
@click.argument("run_id")
@click.argument("decision", type=click.Choice(["approve", "edit", "reject"]))
@click.option("--arguments", "arguments_json", help="With edit: the call's arguments, a JSON object.")
@click.option("--reason", help="Why; recorded in the trail (a rejection's is what the model reads).")
@click.option("--by", "by", help="Who decides, recorded in the trail (default: cli:<your user name>).")
@click.option("--call", help="The call decided (the wait's `call`, e.g. think.v2#1): another call's wait refuses it.")
@click.option("--event-id", help="Idempotency id of this decision (default: random).")
@pass_context
def decide(
    obj: Context,
    run_id: str,
    decision: str,
    arguments_json: str | None,
    reason: str | None,
    by: str | None,
    call: str | None,
    event_id: str | None,
) -> None:
    """Decide the tool call RUN_ID waits on for approval (`dsmo status` shows it: waitingData).

    \b
    Examples:
      dsmo decide support-1 approve --by ana --call think.v2#1
      dsmo decide support-1 edit --arguments '{"order": "B-7", "amount": 60}' --reason "half"
      dsmo decide support-1 reject --reason "refunds of TVs need an inspection"
    """
    arguments = json_object(arguments_json, "--arguments") if arguments_json is not None else None

    decider = by or f"cli:{_user()}"

    async def go() -> Any:
        client = await obj.client()
        return await client.run(run_id).decide(
            decision, arguments=arguments, reason=reason, by=decider, call=call, event_id=event_id
        )

    click.echo(ack_line(run(go), run_id, "TOOL_DECIDED"))


def _user() -> str:
    try:
        return getpass.getuser()[:100]
    except (OSError, KeyError):  # no user name in this environment
        return "unknown"
