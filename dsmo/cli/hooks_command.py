"""`dsmo hooks`: webhook subscriptions (add, list, remove) and deliveries past their budget (failed, redeliver)."""

from __future__ import annotations

import json
from typing import Any

import click

from dsmo.cli.click_context import Context, pass_context, run
from dsmo.workflows.contracts.hook_io import HOOK_EVENTS


@click.group("hooks")
def hooks() -> None:
    """Webhooks: POST a run's start, waits and end to a URL, signed, retried until taken."""


@hooks.command("add")
@click.argument("url")
@click.option("--events", required=True, help=f"Comma-separated: {', '.join(HOOK_EVENTS)}.")
@click.option("--agent", help="Only runs of this agent (default: every agent).")
@click.option("--max-attempts", default=12, show_default=True, type=click.IntRange(1, 100), help="POSTs at most.")
@click.option(
    "--first-retry", default=1.0, show_default=True, type=click.FloatRange(0, 3600, min_open=True),
    help="Seconds before the second POST; each next one doubles (up to 10 min).",
)  # fmt: skip
@pass_context
def add(obj: Context, url: str, events: str, agent: str | None, max_attempts: int, first_retry: float) -> None:
    """Subscribe URL to EVENTS; prints the subscription's secret once (it signs every POST).

    \b
    Example:
      dsmo hooks add https://example.com/dsmo --events RUN_COMPLETED,RUN_WAITING --agent support
    """

    async def go() -> Any:
        client = await obj.client()
        return await client.hooks.add(
            url, events.split(","), agent=agent, max_attempts=max_attempts, first_retry_seconds=first_retry
        )

    made = run(go)
    click.echo(f"subscribed {made.id}: {', '.join(made.events)} -> {made.url}")
    click.echo(f"secret (shown once; it signs every POST): {made.secret}")


@hooks.command("list")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def list_hooks(obj: Context, as_json: bool) -> None:
    """The subscriptions (their secrets are never shown again)."""

    async def go() -> Any:
        return await (await obj.client()).hooks()

    shown = [made.shown() for made in run(go)]
    if as_json:
        click.echo(json.dumps(shown))
        return
    for made in shown:
        click.echo(f"{made['id']}  {','.join(made['events'])}  {made['agent'] or '*'}  {made['url']}")


@hooks.command("remove")
@click.argument("subscription_id")
@pass_context
def remove(obj: Context, subscription_id: str) -> None:
    """Remove a subscription; its deliveries not yet taken stop."""

    async def go() -> bool:
        return await (await obj.client()).hooks.remove(subscription_id)

    if not run(go):
        raise click.UsageError(f"SUBSCRIPTION_ID: no subscription {subscription_id!r} (dsmo hooks list)")
    click.echo(f"removed {subscription_id}")


@hooks.command("failed")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def failed(obj: Context, as_json: bool) -> None:
    """Deliveries past their budget, with why their last POST failed (redeliver them by id)."""

    async def go() -> Any:
        return await (await obj.client()).hooks.failed()

    records = run(go)
    if as_json:
        click.echo(json.dumps(records))
        return
    for record in records:
        click.echo(f"{record['deliveryId']}  {record['event']}  {record['runId']}  {record['reason']}")


@hooks.command("redeliver")
@click.argument("delivery_id")
@pass_context
def redeliver(obj: Context, delivery_id: str) -> None:
    """Deliver a failed delivery again (the same delivery id, a fresh budget)."""

    async def go() -> str:
        return await (await obj.client()).hooks.redeliver(delivery_id)

    click.echo(f"redelivering {delivery_id} ({run(go)})")
