"""The seed's three monitoring queries, on Temporal visibility instead of SQL.

Each function also documents the `temporal workflow list --query` that gives the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from temporalio.client import Client, WorkflowExecution

from dsmo.starter.client import run_health
from dsmo.workflows.common import search_attributes as sa
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
