"""`dsmo decide`: approve, edit or reject the tool call a run waits on (`TOOL_DECIDED`), or raise or
stop the spent budget it waits on (`BUDGET_DECIDED`)."""

from __future__ import annotations

import getpass
from typing import Any

import click

from dsmo.cli.click_context import Context, json_object, pass_context, run
from dsmo.cli.render import ack_line

CALL_DECISIONS = ("approve", "edit", "reject")
BUDGET_DECISIONS = ("raise", "stop")


@click.command("decide")
@click.argument("run_id")
@click.argument("decision", type=click.Choice([*CALL_DECISIONS, *BUDGET_DECISIONS]))
@click.option("--arguments", "arguments_json", help="With edit: the call's arguments, a JSON object.")
@click.option("--reason", help="Why; recorded in the trail (a rejection's is what the model reads).")
@click.option("--by", "by", help="Who decides, recorded in the trail (default: cli:<your user name>).")
@click.option("--call", help="The call decided (the wait's `call`, e.g. think.v2#1): another call's wait refuses it.")
@click.option("--tokens", type=click.IntRange(min=1), help="With raise: the new token limit.")
@click.option("--cost-usd", type=click.FloatRange(min=0, min_open=True), help="With raise: the new limit in USD.")
@click.option("--model-calls", type=click.IntRange(min=1), help="With raise: the new limit of model calls.")
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
    tokens: int | None,
    cost_usd: float | None,
    model_calls: int | None,
    event_id: str | None,
) -> None:
    """Decide what RUN_ID waits on (`dsmo status` shows it): a tool call waiting for approval
    (approve, edit, reject), or a spent budget (raise, stop).

    \b
    Examples:
      dsmo decide support-1 approve --by ana --call think.v2#1
      dsmo decide support-1 edit --arguments '{"order": "B-7", "amount": 60}' --reason "half"
      dsmo decide support-1 reject --reason "refunds of TVs need an inspection"
      dsmo decide support-1 raise --cost-usd 2.5 --reason "a long ticket"
      dsmo decide support-1 stop
    """
    decider = by or f"cli:{_user()}"
    if decision in BUDGET_DECISIONS:
        if arguments_json is not None or call is not None:
            raise click.UsageError(f"--arguments and --call decide a tool call, not a budget ({decision})")

        async def budget() -> Any:
            handle = (await obj.client()).run(run_id)
            return await handle.decide_budget(
                decision,
                tokens=tokens,
                cost_usd=cost_usd,
                model_calls=model_calls,
                reason=reason,
                by=decider,
                event_id=event_id,
            )

        click.echo(ack_line(run(budget), run_id, "BUDGET_DECIDED"))
        return
    if tokens is not None or cost_usd is not None or model_calls is not None:
        raise click.UsageError(f"--tokens, --cost-usd and --model-calls raise a budget, not {decision} a tool call")
    arguments = json_object(arguments_json, "--arguments") if arguments_json is not None else None

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
