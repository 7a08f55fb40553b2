"""`dsmo events RUN`: a run's audit trail, a page at a time (`trail_pages` is the paging rule)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from dsmo.cli.click_context import Context, run
from dsmo.cli.render import INBOX_EVENTS, event_lines
from dsmo.client.trail_pages import DEFAULT_LIMIT, MAX_LIMIT, TrailPage

F = TypeVar("F", bound=Callable[..., Any])


def trail_options(command: F) -> F:
    """The paging options of `dsmo events`."""
    options = [
        click.option(
            "--limit",
            type=int,
            default=DEFAULT_LIMIT,
            show_default=True,
            help=f"Show at most this many events (1 to {MAX_LIMIT}); without a cursor, the latest ones.",
        ),
        click.option("--after", type=int, help="Show the events after this sequence number (the next page)."),
        click.option("--before", type=int, help="Show the events before this sequence number (the page before)."),
        click.option("--all", "show_all", is_flag=True, help="Show the whole trail from its start, page by page."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def print_trail(
    obj: Context,
    run_id: str,
    *,
    as_json: bool,
    inbox_only: bool,
    paging: dict[str, Any],
) -> None:
    """Print a page of the run's trail (or, with ``show_all``, every page as it is read).

    The cursors of the pages next to it go to stderr, so the output stays the events alone.

    Args:
        obj: The CLI's context.
        run_id: The run.
        as_json: Print JSON lines.
        inbox_only: Only the inbox's events (of the page).
        paging: The options of `trail_options`: ``limit``, ``after``, ``before``, ``show_all``.
    """
    limit: int = paging["limit"]
    after: int | None = paging["after"]
    before: int | None = paging["before"]
    show_all: bool = paging["show_all"]

    def emit(page: TrailPage) -> None:
        found = [event for event in page.events if not inbox_only or event.type in INBOX_EVENTS]
        for line in (event.model_dump_json() for event in found) if as_json else event_lines(found):
            click.echo(line)

    if show_all:
        if before is not None:
            raise click.UsageError("--before: not with --all (which reads from the start, or --after SEQ)")

        async def every() -> None:
            client = await obj.client()
            async for page in client.event_pages(run_id, after=after or 0):
                emit(page)

        run(every)
        return

    async def one() -> TrailPage:
        client = await obj.client()
        return await client.events_page(run_id, after=after, before=before, limit=limit)

    page = run(one)
    emit(page)
    more = []
    if page.previous_before is not None:
        more.append(f"older: dsmo events {run_id} --before {page.previous_before}")
    if page.next_after is not None:
        more.append(f"newer: dsmo events {run_id} --after {page.next_after}")
    if more:
        shown = f"{page.events[0].seq}-{page.events[-1].seq}" if page.events else "none"
        click.echo(f"events {shown} of {page.total}; {'; '.join(more)}; all: --all", err=True)
