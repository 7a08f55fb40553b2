"""The task list: runs waiting for a person, read from Temporal visibility (no second database).

What the console's task page shows, and what a program that serves people's work lists.

A task is a run whose `AgentExecutionStatus` is `waiting` and whose `WaitingFor` is one of the
person-facing waits. Its row comes from the search attributes alone: `AgentName`, `WaitingFor`,
`WaitingOn` (the expected sender or recipient), `WaitingUntil` (due) and `WaitingSince` (age).
Filters become a visibility query; values are checked first, never spliced in raw.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from temporalio.api.workflow.v1 import WorkflowExecutionInfo
from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest
from temporalio.converter import decode_typed_search_attributes
from temporalio.service import RPCError

from dsmo.client.core import ClientCore
from dsmo.client.task_counts import TaskCounts
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.identifiers import agent_name_problem

# Waits a person completes. Child-agent and delay waits show on run pages, not as tasks.
PERSON_WAITS = ("response", "document", "signature", "test", "event", "approval", "budget")
PAGE_SIZE = 25
LIST_TIMEOUT = timedelta(seconds=10)
# Free-text filters: printable, no quote or backslash (they would end the query's string).
_PLAIN = re.compile(r"[^'\"\\\x00-\x1f\x7f]{1,200}")


class FilterError(ValueError):
    """A filter that cannot be searched for; the message names the field."""


@dataclass(frozen=True)
class TaskFilter:
    """What the person asked to see.

    Attributes:
        kind: One of `PERSON_WAITS`, or None for all.
        agent: An agent name, or None.
        assignee: `WaitingOn`, exactly, or None.
        overdue: Only tasks past their due time.
        run: A run id or the start of one, or None.
    """

    kind: str | None = None
    agent: str | None = None
    assignee: str | None = None
    overdue: bool = False
    run: str | None = None

    def check(self) -> None:
        """Raise `FilterError` naming the first field that cannot be searched for."""
        if self.kind and self.kind not in PERSON_WAITS:
            raise FilterError(f"kind: {self.kind!r} is not a task kind ({', '.join(PERSON_WAITS)})")
        if self.agent and agent_name_problem(self.agent):
            raise FilterError(f"agent: {agent_name_problem(self.agent)}")
        for name, value in (("assignee", self.assignee), ("run", self.run)):
            if value and not _PLAIN.fullmatch(value):
                raise FilterError(f"{name}: up to 200 characters without quotes, backslashes or control characters")

    def query(self, now: datetime) -> str:
        """The visibility query for these filters (call `check` first)."""
        kinds = ", ".join(f"'{kind}'" for kind in ((self.kind,) if self.kind else PERSON_WAITS))
        parts = [
            "ExecutionStatus = 'Running'",
            f"{sa.AGENT_EXECUTION_STATUS.name} = 'waiting'",
            f"{sa.WAITING_FOR.name} IN ({kinds})",
        ]
        if self.agent:
            parts.append(f"{sa.AGENT_NAME.name} = '{self.agent}'")
        if self.assignee:
            parts.append(f"{sa.WAITING_ON.name} = '{self.assignee}'")
        if self.overdue:
            parts.append(f"{sa.WAITING_UNTIL.name} < '{now.isoformat()}'")
        if self.run:
            parts.append(f"WorkflowId STARTS_WITH '{self.run}'")
        return " AND ".join(parts)


def _each_run_once(executions: Sequence[WorkflowExecutionInfo]) -> list[WorkflowExecutionInfo]:
    """A page's rows, one per run: a run that continued as new while visibility was catching up
    can show both its executions as running for a moment (`run_selection`)."""
    seen: set[str] = set()
    kept = []
    for info in executions:
        if info.execution.workflow_id not in seen:
            seen.add(info.execution.workflow_id)
            kept.append(info)
    return kept


@dataclass(frozen=True)
class Task:
    """One run waiting for a person."""

    run_id: str
    agent: str
    kind: str
    assignee: str | None
    due: datetime | None
    since: datetime | None
    started: datetime

    def overdue(self, now: datetime) -> bool:
        """Whether the wait is past its due time."""
        return self.due is not None and self.due < now


@dataclass(frozen=True)
class TaskPage:
    """One page of tasks, the opaque token of the next one, and how many match in all."""

    tasks: list[Task]
    next_page: str | None
    total: int


def _task(info: WorkflowExecutionInfo) -> Task:
    attrs = decode_typed_search_attributes(info.search_attributes)
    return Task(
        run_id=info.execution.workflow_id,
        agent=attrs.get(sa.AGENT_NAME) or "",
        kind=attrs.get(sa.WAITING_FOR) or "",
        assignee=attrs.get(sa.WAITING_ON),
        due=attrs.get(sa.WAITING_UNTIL),
        since=attrs.get(sa.WAITING_SINCE),
        started=info.start_time.ToDatetime(tzinfo=UTC),
    )


def _decode_page(page: str | None) -> bytes | None:
    if not page:
        return None
    try:
        return base64.urlsafe_b64decode(page + "=" * (-len(page) % 4))
    except (binascii.Error, ValueError):
        raise FilterError("page: not a page of this list; start again from the first page") from None


def _drop(total: asyncio.Future[int]) -> None:
    """A refused page needs no total: stop its count (a shared count goes on for its other
    callers), or read the failure it already ended with, so none is logged as never retrieved."""
    if total.done():
        if not total.cancelled():
            total.exception()
    else:
        total.cancel()


async def task_page(
    core: ClientCore,
    filters: TaskFilter,
    now: datetime,
    *,
    page: str | None = None,
    page_size: int = PAGE_SIZE,
    counts: TaskCounts | None = None,
) -> TaskPage:
    """One page of tasks matching ``filters``, newest runs first (visibility's order).

    The page and the total are asked for at once. With ``counts``, a total counted in the last
    few seconds is reused (see `TaskCounts`), except an overdue filter's; without, every call counts.

    Raises:
        FilterError: A filter or the page token cannot be used.
    """
    filters.check()
    query = filters.query(now)
    token = _decode_page(page)

    async def counting() -> int:
        return (await core.temporal.count_workflows(query, rpc_timeout=LIST_TIMEOUT)).count

    # An overdue filter's query holds the current time, so its total is never the same twice.
    kept = counts if counts is not None and not filters.overdue else None
    total = asyncio.ensure_future(kept.total(query, counting) if kept else counting())
    request = ListWorkflowExecutionsRequest(
        namespace=core.temporal.namespace, page_size=page_size, next_page_token=token or b"", query=query
    )
    try:
        # Not retried: Temporal answers a token it cannot read with UNKNOWN, which the SDK would
        # retry for ~10 s (a person's bad link is not a server hiccup); the person can reload.
        listing = await core.temporal.workflow_service.list_workflow_executions(
            request, retry=False, timeout=LIST_TIMEOUT
        )
        counted = await total
    except RPCError as err:
        _drop(total)
        if token is not None:
            raise FilterError("page: not a page of this list; start again from the first page") from None
        raise FilterError(f"filters: visibility refused the query: {err.message}") from None
    except BaseException:
        _drop(total)
        raise
    following = listing.next_page_token
    return TaskPage(
        tasks=[_task(info) for info in _each_run_once(listing.executions)],
        next_page=base64.urlsafe_b64encode(following).decode().rstrip("=") if following else None,
        total=counted,
    )
