"""DSMO's one rule for selecting runs by query, without a server: each run once, judged by its
current execution, never by the row of an earlier generation; a row visibility has not caught up
with is waited for; a syntax error is placed in the user's own query."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from dsmo.client.client_errors import InvalidQuery
from dsmo.client.query_errors import placed
from dsmo.client.run_selection import (
    Scope,
    Selection,
    VisibilityBehind,
    current_filter,
    current_rows,
    selected,
)
from dsmo.workflows.common import search_attributes as sa

RUNNING, CAN, DONE = (
    WorkflowExecutionStatus.RUNNING,
    WorkflowExecutionStatus.CONTINUED_AS_NEW,
    WorkflowExecutionStatus.COMPLETED,
)


@dataclass
class Row:
    id: str
    run_id: str
    status: WorkflowExecutionStatus
    version: str = "v1"

    @property
    def typed_search_attributes(self) -> TypedSearchAttributes:
        return TypedSearchAttributes([SearchAttributePair(sa.WORKFLOW_VERSION, self.version)])


@dataclass
class FakeTemporal:
    """Visibility's rows that matched a filter, Temporal's own record of each run's current
    execution, how visibility indexes the current executions (a queue per execution: it catches
    up one read at a time), and which current rows the filter matches."""

    listed: list[Row]
    current: dict[str, Row]
    indexed: dict[str, list[Row | None]] = field(default_factory=dict)
    matching: set[str] = field(default_factory=set)  # run ids of current rows the filter matches
    described: list[str] = field(default_factory=list)
    read: int = 0

    async def list_workflows(self, query: str, limit: int | None = None) -> AsyncIterator[Row]:
        if query.startswith("WorkflowId = "):  # one execution's row, as visibility has it now
            run_id = query.split("RunId = '", 1)[1].split("'", 1)[0]
            queue = self.indexed.get(run_id) or [self._current_by_run(run_id)]
            row = queue.pop(0) if len(queue) > 1 else queue[0]
            if row is not None:
                yield row
            return
        for row in self.listed:
            self.read += 1
            yield row

    async def count_workflows(self, query: str) -> Any:
        run_id = query.split("RunId = '", 1)[1].split("'", 1)[0]
        return SimpleNamespace(count=int(run_id in self.matching))

    def get_workflow_handle(self, workflow_id: str) -> Any:
        async def describe() -> Row:
            self.described.append(workflow_id)
            if workflow_id not in self.current:
                raise RPCError("not found", RPCStatusCode.NOT_FOUND, b"")
            return self.current[workflow_id]

        return SimpleNamespace(describe=describe)

    def _current_by_run(self, run_id: str) -> Row | None:
        return next((row for row in self.current.values() if row.run_id == run_id), None)


async def ids(fake: FakeTemporal, selection: Selection | None = None, **options: Any) -> list[str]:
    chosen = selection or Selection("AgentName = 'a'", scope=Scope.OPEN)
    return [row.id async for row in selected(cast(Client, fake), chosen, **options)]


async def test_a_run_with_five_generations_is_selected_once_by_its_current_execution() -> None:
    generations = [Row("long", f"g{n}", CAN) for n in range(5)]
    now = Row("long", "g5", RUNNING)
    fake = FakeTemporal([*generations, now], {"long": now}, matching={"g5"})
    assert await ids(fake) == ["long"]
    assert fake.described == ["long"]  # one look at Temporal's own record, not one per row


async def test_a_moved_run_is_not_selected_by_its_old_generations_version() -> None:
    # The filter (WorkflowVersion = 'v1') matched the closed row of the run before it moved.
    before = Row("moved", "r1", CAN, version="v1")
    now = Row("moved", "r2", RUNNING, version="v2")
    fake = FakeTemporal([before], {"moved": now}, matching=set())
    assert await ids(fake) == []


async def test_a_run_whose_new_execution_is_not_indexed_yet_is_found_through_its_old_row() -> None:
    before = Row("moving", "r1", CAN)
    now = Row("moving", "r2", RUNNING, version="v2")
    fake = FakeTemporal([before], {"moving": now}, indexed={"r2": [None, None, now]}, matching={"r2"})
    assert await ids(fake) == ["moving"]


async def test_a_row_visibility_has_not_updated_is_judged_once_it_has() -> None:
    stale = Row("run", "r1", RUNNING, version="v1")
    now = Row("run", "r1", RUNNING, version="v2")
    fake = FakeTemporal([stale], {"run": now}, indexed={"r1": [stale, now]}, matching={"r1"})
    assert await ids(fake) == ["run"]


async def test_a_run_visibility_never_catches_up_with_is_reported_not_guessed() -> None:
    before = Row("lagging", "r1", CAN)
    fake = FakeTemporal([before], {"lagging": Row("lagging", "r2", RUNNING)}, indexed={"r2": [None]})
    with pytest.raises(VisibilityBehind, match="run lagging: visibility has not indexed"):
        await ids(fake, catch_up_seconds=0.1)
    behind: list[str] = []

    async def note(run_id: str, err: VisibilityBehind) -> None:
        behind.append(run_id)

    assert await ids(fake, catch_up_seconds=0.1, on_behind=note) == [] and behind == ["lagging"]


async def test_the_scope_is_judged_by_the_current_execution_and_deleted_runs_are_passed_over() -> None:
    open_rows = [Row("ended", "e1", RUNNING), Row("gone", "x1", RUNNING), Row("open", "o1", RUNNING)]
    fake = FakeTemporal(
        open_rows, {"ended": Row("ended", "e1", DONE), "open": Row("open", "o1", RUNNING)}, matching={"o1", "e1"}
    )
    assert await ids(fake) == ["open"]
    ended = Selection("AgentName = 'a'", scope=Scope.ENDED)
    assert await ids(fake, ended) == ["ended"]


async def test_the_limit_stops_reading_rows_once_it_is_reached() -> None:
    rows = [Row(f"r{n}", f"x{n}", RUNNING) for n in range(50)]
    fake = FakeTemporal(rows, {row.id: row for row in rows})
    assert await ids(fake, limit=3) == ["r0", "r1", "r2"] and fake.read == 3


async def test_views_list_current_rows_each_run_once() -> None:
    # A run that continued as new while the pages were read can be listed twice for a moment.
    rows = [Row("a", "1", RUNNING), Row("b", "2", DONE), Row("a", "3", RUNNING)]
    fake = FakeTemporal(rows, {})
    listed = [row.run_id async for row in current_rows(cast(Client, fake), Selection())]
    assert listed == ["1", "2"]


def test_earlier_generations_rows_are_left_out_of_views_but_read_by_confirmed_selections() -> None:
    chosen = Selection("WorkflowVersion = 'v1'", "AgentName = 'a'", Scope.ENDED)
    assert current_filter(chosen) == (
        "WorkflowType='AgentExecution' AND ExecutionStatus NOT IN ('Running', 'ContinuedAsNew') "
        "AND AgentName = 'a' AND (WorkflowVersion = 'v1')"
    )
    # A run that ended a moment ago may still be listed as running: Temporal's word decides.
    assert chosen.filter(generations=True) == (
        "WorkflowType='AgentExecution' AND AgentName = 'a' AND (WorkflowVersion = 'v1')"
    )
    assert Selection(scope=Scope.OPEN).filter(generations=True).endswith("IN ('Running', 'ContinuedAsNew')")


class Refusing:
    """Temporal's parser: positions count from 28 (its own SQL) to the end of the bad token."""

    async def count_workflows(self, query: str) -> Any:
        raise RPCError(
            "invalid query: malformed SQL query: syntax error at position 29", RPCStatusCode.INVALID_ARGUMENT, b""
        )


async def test_a_syntax_error_is_placed_in_the_users_own_query() -> None:
    client = cast(Client, Refusing())
    query = "AgentName='x' ANDD 1"
    text = Selection(query, "AgentExecutionStatus='failed'", Scope.ENDED).filter(generations=True)
    end_of_token = 28 + len(text) - len(query) - 1 + len("AgentName='x' ANDD")
    message = f"invalid query: malformed SQL query: syntax error at position {end_of_token} near 'ANDD'"
    assert await placed(client, message, query, text) == (
        "malformed SQL query: syntax error at character 15 of the query near 'ANDD' (\"AgentName='x' ANDD 1\")"
    )
    assert "position" not in await placed(client, "syntax error at position 9999", query, text)
    assert await placed(client, "invalid query: invalid search attribute: Foo", "Foo='x'", text) == (
        "invalid search attribute: Foo"
    )


async def test_a_refused_filter_is_an_invalid_query_naming_the_query() -> None:
    class Listing(Refusing):
        async def list_workflows(self, query: str, limit: int | None = None) -> AsyncIterator[Row]:
            raise RPCError("invalid query: invalid search attribute: Foo", RPCStatusCode.INVALID_ARGUMENT, b"")
            yield  # pragma: no cover - an async generator

    with pytest.raises(InvalidQuery, match=r"^query: invalid search attribute: Foo$"):
        await ids(cast(FakeTemporal, Listing()), Selection("Foo = 'x'"))
