"""Selecting runs by a visibility query: the runs as they are now, each once.

Temporal's visibility keeps one row per *execution*, not per run. A DSMO run that moved to
another version, went back to an earlier node or carried a long history over continue-as-new
keeps its id and gets a new execution; the closed one keeps its row, with the version, status
and wait it had then. A query over rows therefore selects executions: a moved run by its old
version, a long run once per generation, a run that ended while the pages were read twice.

Every command that selects runs by a query goes through this module, under one rule:

- a run is judged by its current execution (the newest under its id), never by the row of an
  earlier generation (`ExecutionStatus = 'ContinuedAsNew'`);
- each run is selected at most once, however many of its rows match or however the rows move
  between pages;
- what *acts* on runs (bulk operations, moves, what-if) confirms each run with Temporal itself
  (`selected`): a run whose newest change visibility has not indexed yet is found through any
  of its rows and judged once its current row has caught up, so the selection does not depend on
  how far visibility lags; what only *shows* runs (lists, the console, monitoring, counts) reads the
  current rows as visibility has them (`current_rows`, `current_filter`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from temporalio.client import Client, WorkflowExecution, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from dsmo.client.client_errors import TemporalUnavailable
from dsmo.client.connection import first_line
from dsmo.client.query_errors import answering
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.errors import DsmoError

RUNS = "WorkflowType='AgentExecution'"
EARLIER_GENERATION = "ExecutionStatus != 'ContinuedAsNew'"
# How long a confirmation waits for visibility to index a run's newest change.
CATCH_UP_SECONDS = 30.0
# Runs confirmed at once (each is one describe, and rarely one list of its current row).
CONFIRMING = 32


class Scope(StrEnum):
    """Which runs a selection may hold, by their current execution's Temporal status."""

    ANY = "any"
    OPEN = "open"
    ENDED = "ended"

    def clause(self, *, generations: bool) -> str | None:
        """The rows of runs in this scope; with ``generations``, also their earlier generations' rows."""
        if self is Scope.OPEN:
            return "ExecutionStatus IN ('Running', 'ContinuedAsNew')" if generations else "ExecutionStatus = 'Running'"
        if self is Scope.ENDED:
            # Every row: a run that ended a moment ago may still be listed as running; Temporal's
            # own word decides (`selected`).
            return None if generations else "ExecutionStatus NOT IN ('Running', 'ContinuedAsNew')"
        return None if generations else EARLIER_GENERATION

    def admits(self, status: WorkflowExecutionStatus | None) -> bool:
        """Whether a current execution in ``status`` is in this scope."""
        running = status is WorkflowExecutionStatus.RUNNING
        return self is Scope.ANY or running == (self is Scope.OPEN)


class VisibilityBehind(DsmoError):
    """Visibility did not catch up with a run's newest change in time; the run was not judged."""


@dataclass(frozen=True)
class Selection:
    """What a command selects: the user's filter, the command's own clause, and a scope.

    Attributes:
        query: The user's visibility filter (Temporal's syntax), or None for every run.
        clause: A condition the command adds (for example only failed runs); kept apart from
            ``query`` so an error in the user's filter is reported against their own text.
        scope: Open runs, ended runs, or any.
    """

    query: str | None = None
    clause: str | None = None
    scope: Scope = Scope.ANY

    def filter(self, *, generations: bool) -> str:
        """The visibility filter: current rows only, or (``generations``) every generation's rows."""
        clauses = [RUNS, self.scope.clause(generations=generations), self.clause]
        text = " AND ".join(clause for clause in clauses if clause)
        return f"{text} AND ({self.query})" if self.query else text


def current_filter(selection: Selection) -> str:
    """The filter of the runs' current rows: for views and counts (each run's one row, as indexed)."""
    return selection.filter(generations=False)


async def current_rows(
    client: Client, selection: Selection, *, limit: int | None = None
) -> AsyncIterator[WorkflowExecution]:
    """The current rows ``selection`` matches, each run once, as visibility has them now.

    Raises:
        InvalidQuery: Temporal refused the filter (the message places the error in the user's query).
        TemporalUnavailable: Temporal cannot be reached.
    """
    seen: set[str] = set()
    text = current_filter(selection)
    async with answering(client, selection.query, text):
        async for execution in client.list_workflows(text):
            if execution.id in seen:  # listed again after it changed while the pages were read
                continue
            seen.add(execution.id)
            yield execution
            if limit is not None and len(seen) >= limit:
                return


async def selected(
    client: Client,
    selection: Selection,
    *,
    limit: int | None = None,
    catch_up_seconds: float = CATCH_UP_SECONDS,
    on_behind: Callable[[str, VisibilityBehind], Awaitable[None]] | None = None,
) -> AsyncIterator[WorkflowExecution]:
    """The runs ``selection`` matches now, each once, confirmed with Temporal (for what acts on runs).

    Every generation's rows are read, so a run whose newest execution visibility has not indexed
    yet is still found; each run is then judged by its current execution: the matched row stands
    when it is that execution and agrees with Temporal's own record of it, else the current row is
    waited for (up to ``catch_up_seconds``) and the filter asked of it.

    Args:
        client: The Temporal client.
        selection: What to select.
        limit: At most this many runs (no row is read past the one that completes them).
        catch_up_seconds: How long to wait for visibility to index a run's newest change.
        on_behind: Called for a run that could not be judged in time (default: raise).

    Yields:
        Each selected run's current row, in visibility's order.

    Raises:
        InvalidQuery: Temporal refused the filter (the message places the error in the user's query).
        VisibilityBehind: A run could not be judged in time and no ``on_behind`` was given.
        TemporalUnavailable: Temporal cannot be reached.
    """
    seen: set[str] = set()
    text = selection.filter(generations=True)
    chunk: list[WorkflowExecution] = []
    wanted = limit if limit is not None else -1  # runs still to select; -1: no limit

    async def judged(rows: list[WorkflowExecution]) -> list[WorkflowExecution | None]:
        async def one(row: WorkflowExecution) -> WorkflowExecution | None:
            try:
                return await _confirmed(client, row, selection, text, catch_up_seconds)
            except VisibilityBehind as behind:
                if on_behind is None:
                    raise
                await on_behind(row.id, behind)
                return None

        return list(await asyncio.gather(*(one(row) for row in rows)))

    async with answering(client, selection.query, text):
        async for execution in client.list_workflows(text):
            if execution.id in seen:
                continue
            seen.add(execution.id)
            chunk.append(execution)
            if len(chunk) < (CONFIRMING if wanted < 0 else min(CONFIRMING, wanted)):
                continue
            for row in await judged(chunk):
                if row is not None:
                    yield row
                    wanted -= 1
            chunk = []
            if wanted == 0:
                return
        for row in await judged(chunk):
            if row is not None:
                yield row


async def count_current(client: Client, selection: Selection) -> int:
    """How many runs ``selection`` matches, by their current rows as visibility has them now.

    Raises:
        InvalidQuery: Temporal refused the filter.
        TemporalUnavailable: Temporal cannot be reached.
    """
    text = current_filter(selection)
    async with answering(client, selection.query, text):
        return (await client.count_workflows(text)).count
    raise AssertionError("unreachable")  # pragma: no cover - answering re-raises


async def _confirmed(
    client: Client, row: WorkflowExecution, selection: Selection, text: str, catch_up_seconds: float
) -> WorkflowExecution | None:
    current = await _current(client, row.id)
    if current is None or not selection.scope.admits(current.status):
        return None
    if row.run_id == current.run_id and agrees(row, current):
        return row  # the row the filter matched says what the run is now
    # An earlier generation's row, or a row visibility has not updated yet: judge the current
    # execution's row once it says what Temporal says. Temporal is asked again on every look, so a
    # run that keeps changing (or continues as new again) is judged by its latest state.
    loop = asyncio.get_running_loop()
    deadline, pause = loop.time() + catch_up_seconds, 0.05
    listed = await _current_row(client, current)
    while listed is None or listed.run_id != current.run_id or not agrees(listed, current):
        if loop.time() >= deadline:
            raise VisibilityBehind(
                f"run {row.id}: visibility has not indexed its latest change after {catch_up_seconds:g} s; "
                "it was not judged (run the command again)"
            )
        await asyncio.sleep(pause)
        pause = min(pause * 2, 1.0)
        current = await _current(client, row.id)
        if current is None or not selection.scope.admits(current.status):
            return None
        listed = await _current_row(client, current)
    query = f"WorkflowId = {_quoted(row.id)} AND RunId = {_quoted(current.run_id)} AND {text}"
    return listed if await _asked(client, row.id, client.count_workflows(query)) else None


async def _current(client: Client, run_id: str) -> WorkflowExecutionDescription | None:
    try:
        return await client.get_workflow_handle(run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:  # deleted since it was listed
            return None
        raise _not_the_query(run_id, err) from None


async def _current_row(client: Client, current: WorkflowExecutionDescription) -> WorkflowExecution | None:
    """The current execution's row as visibility has it now (None: not indexed yet)."""
    query = f"WorkflowId = {_quoted(current.id)} AND RunId = {_quoted(current.run_id)}"
    try:
        async for found in client.list_workflows(query, limit=1):
            return found
    except RPCError as err:
        raise _not_the_query(current.id, err) from None
    return None


async def _asked(client: Client, run_id: str, counting: Awaitable[Any]) -> int:
    try:
        return int((await counting).count)
    except RPCError as err:
        raise _not_the_query(run_id, err) from None


def _not_the_query(run_id: str, err: RPCError) -> DsmoError:
    """An error judging one run is not the user's filter's fault: it is not reported as one."""
    if err.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
        return TemporalUnavailable(f"Temporal: {first_line(err)}")
    return DsmoError(f"run {run_id}: {first_line(err)}")


def agrees(row: WorkflowExecution, current: WorkflowExecutionDescription) -> bool:
    """Whether a visibility row says what Temporal itself says of the execution now.

    Compares Temporal's status and DSMO's own search attributes (what DSMO's filters select by).
    """
    if row.status != current.status:
        return False
    listed, known = row.typed_search_attributes, current.typed_search_attributes
    return all(listed.get(key) == known.get(key) for key in sa.ALL)


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
