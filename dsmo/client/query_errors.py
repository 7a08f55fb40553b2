"""Temporal's refusals of a visibility filter, as DSMO's errors that place the fault in the user's query.

DSMO ANDs its own clauses before the user's filter (`run_selection`), and Temporal counts a
syntax error's position in the SQL it builds around the whole text, so its position means nothing
to the user; here it is counted again in the user's own query. An empty filter is refused before
Temporal is asked (`given_query`): with only DSMO's clauses left, it would select every run.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from dsmo.client.client_errors import InvalidQuery, TemporalUnavailable
from dsmo.client.connection import first_line

EMPTY_QUERY = (
    "--query: must not be empty (to select every run, say so with a filter such as \"ExecutionStatus='Running'\")"
)


def given_query(query: str | None) -> str | None:
    """``query``, a user's visibility filter (None: none given), refused when it is empty or blank.

    DSMO adds only its own clauses to the user's filter, so an empty one selects every run of
    every agent: a ``--query "$FILTER"`` whose variable is unset must not act on all of them.

    Args:
        query: The filter as given.

    Returns:
        ``query``, unchanged.

    Raises:
        InvalidQuery: ``query`` is empty or blank; nothing was asked of Temporal.
    """
    if query is not None and not query.strip():
        raise InvalidQuery(EMPTY_QUERY)
    return query


@contextlib.asynccontextmanager
async def answering(client: Client, query: str | None, text: str) -> AsyncIterator[None]:
    """Turns Temporal's refusals of ``text`` (a filter ending with the user's ``query``) into DSMO's errors."""
    try:
        yield
    except RPCError as err:
        if err.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            raise TemporalUnavailable(
                f"Temporal at {client.service_client.config.target_host}: {first_line(err)}"
            ) from None
        if err.status != RPCStatusCode.INVALID_ARGUMENT:
            raise
        raise InvalidQuery(f"query: {await placed(client, first_line(err), query, text)}") from None


_POSITION = re.compile(r"syntax error at position (\d+)")
_OFFSET: dict[str, int] = {}  # where Temporal's positions start, asked once per process


async def placed(client: Client, message: str, query: str | None, text: str) -> str:
    """Temporal's message about a refused filter, its position counted in the user's own query.

    Temporal counts a syntax error's position in the SQL it builds around the whole filter; DSMO
    puts its own clauses before the user's, so that position means nothing to the user.
    """
    message = message.removeprefix("invalid query: ")
    found = _POSITION.search(message)
    if not found or not query or not text.endswith(f"({query})"):
        return message
    offset = await _temporal_offset(client)
    end = int(found.group(1)) - offset - (len(text) - len(query) - 1)
    if offset < 0 or not 0 < end <= len(query) + 1:
        return _POSITION.sub("syntax error", message)
    near = re.search(r"near '([^']*)'", message)
    start = end - len(near.group(1)) + 1 if near else end  # Temporal gives where the token ends
    where = f"at character {start} of the query" if near or end < len(query.rstrip()) else "at the end of the query"
    return _POSITION.sub(f"syntax error {where}", message) + f" ({query!r})"


async def _temporal_offset(client: Client) -> int:
    """Where Temporal's positions start: it reports the end of the offending token in its own SQL."""
    if "sql" not in _OFFSET:
        try:
            await client.count_workflows(")")
            _OFFSET["sql"] = -1
        except RPCError as err:
            found = _POSITION.search(str(err))
            _OFFSET["sql"] = int(found.group(1)) - 1 if found else -1
    return _OFFSET["sql"]
