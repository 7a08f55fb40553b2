"""The seed's three monitoring queries, on Temporal visibility instead of SQL.

Each function also documents the `temporal workflow list --query` that gives the same rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from temporalio.client import Client, WorkflowExecution

from dsmo.starter.client import run_health
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.identifiers import AGENT_NAME_PATTERN
from dsmo.workflows.common.status import RunStatus

ACTIVE = (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING)
# Live runs only: a run terminated from outside (`temporal workflow terminate`) keeps its last
# AgentExecutionStatus, since no workflow code ran to change it.
BASE = "WorkflowType='AgentExecution' AND ExecutionStatus='Running'"
STATS_QUERY = f"{BASE} AND AgentExecutionStatus IN ('pending', 'running', 'waiting')"
WAITING_QUERY = f"{BASE} AND AgentExecutionStatus='waiting'"


# Temporal tags a run whose workflow task failed or timed out twice in a row (the embedded
# stack and the compose stack turn this on) and clears the tag when a task succeeds.
FAILING_QUERY = f"{BASE} AND TemporalReportedProblems IS NOT NULL"
PAST_DEADLINE = "past waitingUntil"


def stuck_query(now: datetime) -> str:
    return f"{WAITING_QUERY} AND WaitingUntil < '{now.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}'"


@dataclass(frozen=True)
class StatusCount:
    status: str
    count: int
    avg_age_seconds: float


@dataclass(frozen=True)
class WaitingRun:
    run_id: str
    agent: str
    waiting_for: str
    waiting_until: datetime | None
    age_hours: float  # since the run started (visibility keeps no last-change time)
    problem: str = ""  # why `runs stuck` lists it


async def _list(client: Client, query: str, limit: int) -> list[WorkflowExecution]:
    return [execution async for execution in client.list_workflows(query, limit=limit)]


async def stats(client: Client, *, now: datetime | None = None, limit: int = 10_000) -> list[StatusCount]:
    """Seed: SELECT status, COUNT(*), AVG(age) FROM agent_execution WHERE status IN active GROUP BY status."""
    now = now or datetime.now(UTC)
    ages: dict[str, list[float]] = {status.value: [] for status in ACTIVE}
    for execution in await _list(client, STATS_QUERY, limit):
        status = execution.typed_search_attributes.get(sa.AGENT_EXECUTION_STATUS)
        if status in ages:
            ages[status].append((now - execution.start_time).total_seconds())
    return [
        StatusCount(status, len(values), sum(values) / len(values) if values else 0.0)
        for status, values in ages.items()
    ]


async def waiting(client: Client, *, now: datetime | None = None, limit: int = 1_000) -> list[WaitingRun]:
    """Seed: the runs in WAITING, ordered by waitingUntil."""
    return _waiting_rows(await _list(client, WAITING_QUERY, limit), now or datetime.now(UTC))


async def stuck(client: Client, *, now: datetime | None = None, limit: int = 1_000) -> list[WaitingRun]:
    """Runs that do not move on their own: still WAITING after their waitingUntil (the seed's
    query: a timeout that was never processed), then runs whose workflow task keeps failing."""
    now = now or datetime.now(UTC)
    late = [
        replace(row, problem=PAST_DEADLINE) for row in _waiting_rows(await _list(client, stuck_query(now), limit), now)
    ]
    failing = []
    for row in _waiting_rows(await _list(client, FAILING_QUERY, limit), now):
        failure = await run_health.workflow_task_failure(
            client, await client.get_workflow_handle(row.run_id).describe()
        )
        if failure is not None:  # none: a task succeeded since visibility was written
            failing.append(replace(row, problem=run_health.failing_hint(failure)))
    return late + sorted(failing, key=lambda row: row.run_id)


def _waiting_rows(executions: list[WorkflowExecution], now: datetime) -> list[WaitingRun]:
    rows = []
    for execution in executions:
        attrs = execution.typed_search_attributes
        changed = execution.execution_time or execution.start_time
        rows.append(
            WaitingRun(
                run_id=execution.id,
                agent=attrs.get(sa.AGENT_NAME) or "",
                waiting_for=attrs.get(sa.WAITING_FOR) or "",
                waiting_until=attrs.get(sa.WAITING_UNTIL),
                age_hours=round((now - changed).total_seconds() / 3600, 2),
            )
        )
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(rows, key=lambda row: (row.waiting_until or far, row.run_id))


@dataclass(frozen=True)
class RunSummary:
    """One run as visibility lists it (what `DsmoClient.runs` yields).

    Attributes:
        run_id: The run.
        agent: The definition's agent name.
        status: The run's status (`pending`, `running`, `waiting` or a terminal one).
        waiting_for: While waiting: what for (`response`, `document`, `event`, ...).
        waiting_until: While waiting: when the wait times out.
        started_at: When the run started.
        closed_at: When it ended (None while it runs).
        workflow_version: The hash of the definition the run follows.
    """

    run_id: str
    agent: str
    status: str
    waiting_for: str | None
    waiting_until: datetime | None
    started_at: datetime
    closed_at: datetime | None
    workflow_version: str


def runs_query(
    query: str | None = None, *, status: str | None = None, agent: str | None = None, waiting_for: str | None = None
) -> str:
    """The visibility query of `DsmoClient.runs`: the filters, AND-ed with ``query`` (Temporal's syntax).

    Raises:
        ValueError: A filter is not a run status, a wait kind or an agent name; the values go
            into the query as they are, so a quote in one would change what it asks.
    """
    if status is not None and status not in set(RunStatus):
        raise ValueError(f"status: {status!r} is not a run status ({', '.join(RunStatus)})")
    if waiting_for is not None and not re.fullmatch(r"[a-z_]{1,32}", waiting_for):
        raise ValueError(f"waiting_for: {waiting_for!r} is not a wait kind (response, document, ...)")
    if agent is not None and not re.fullmatch(AGENT_NAME_PATTERN, agent):
        raise ValueError(f"agent: {agent!r} is not an agent name")
    clauses = ["WorkflowType='AgentExecution'"]
    if status:
        clauses.append(f"AgentExecutionStatus='{status}'")
        if status in ("pending", "running", "waiting"):
            clauses.append("ExecutionStatus='Running'")  # a terminated run keeps its last status
    if waiting_for:
        clauses.append(f"WaitingFor='{waiting_for}'")
    if agent:
        clauses.append(f"AgentName='{agent}'")
    if query:
        clauses.append(f"({query})")
    return " AND ".join(clauses)


def run_summary(execution: WorkflowExecution) -> RunSummary:
    """A visibility row as a `RunSummary`."""
    attrs = execution.typed_search_attributes
    waiting_for = attrs.get(sa.WAITING_FOR)
    return RunSummary(
        run_id=execution.id,
        agent=attrs.get(sa.AGENT_NAME) or "",
        status=attrs.get(sa.AGENT_EXECUTION_STATUS) or RunStatus.PENDING.value,
        waiting_for=waiting_for,
        waiting_until=attrs.get(sa.WAITING_UNTIL),
        started_at=execution.start_time,
        closed_at=execution.close_time,
        workflow_version=attrs.get(sa.WORKFLOW_VERSION) or "",
    )
