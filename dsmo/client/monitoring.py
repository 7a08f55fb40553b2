"""The seed's three monitoring queries, on Temporal visibility instead of SQL.

Each function also documents the `temporal workflow list --query` that gives the same rows. Runs
are read by DSMO's one selection rule (`run_selection`): each run once, by its current row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from temporalio.client import Client, WorkflowExecution

from dsmo.client import run_health
from dsmo.client.run_selection import Scope, Selection, current_filter, current_rows
from dsmo.client.status_views import closed_around_status
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.identifiers import AGENT_NAME_PATTERN
from dsmo.workflows.common.status import RunStatus

ACTIVE = (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING)
# Live runs only (`Scope.OPEN`): a run terminated from outside (`temporal workflow terminate`)
# keeps its last AgentExecutionStatus, since no workflow code ran to change it.
STATS = Selection(clause="AgentExecutionStatus IN ('pending', 'running', 'waiting')", scope=Scope.OPEN)
WAITING = Selection(clause="AgentExecutionStatus='waiting'", scope=Scope.OPEN)
# Temporal tags a run whose workflow task failed or timed out twice in a row (the embedded
# stack and the compose stack turn this on) and clears the tag when a task succeeds.
FAILING = Selection(clause="TemporalReportedProblems IS NOT NULL", scope=Scope.OPEN)
PAST_DEADLINE = "past waitingUntil"


def stuck_selection(now: datetime) -> Selection:
    """Runs still waiting after their waitingUntil."""
    deadline = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Selection(clause=f"{WAITING.clause} AND WaitingUntil < '{deadline}'", scope=Scope.OPEN)


def stuck_query(now: datetime) -> str:
    """The `temporal workflow list --query` of the late runs `stuck` lists first."""
    return current_filter(stuck_selection(now))


@dataclass(frozen=True)
class StatusCount:
    """Active runs in one status (`DsmoClient.run_counts`).

    Attributes:
        status: The status.
        count: How many runs are in it.
        avg_age_seconds: Their average age since they started.
    """

    status: str
    count: int
    avg_age_seconds: float


@dataclass(frozen=True)
class WaitingRun:
    """A waiting run (`DsmoClient.waiting_runs`, `DsmoClient.stuck_runs`).

    Attributes:
        run_id: The run.
        agent: Its agent.
        waiting_for: What it waits for (``response``, ``document``, ...).
        waiting_until: Its wait's deadline, if it has one.
        age_hours: Hours since the run started (visibility keeps no last-change time).
        problem: Why `stuck_runs` lists it.
    """

    run_id: str
    agent: str
    waiting_for: str
    waiting_until: datetime | None
    age_hours: float  # since the run started (visibility keeps no last-change time)
    problem: str = ""  # why `runs stuck` lists it


async def _list(client: Client, selection: Selection, limit: int) -> list[WorkflowExecution]:
    return [execution async for execution in current_rows(client, selection, limit=limit)]


async def stats(client: Client, *, now: datetime | None = None, limit: int = 10_000) -> list[StatusCount]:
    """Seed: SELECT status, COUNT(*), AVG(age) FROM agent_execution WHERE status IN active GROUP BY status."""
    now = now or datetime.now(UTC)
    ages: dict[str, list[float]] = {status.value: [] for status in ACTIVE}
    for execution in await _list(client, STATS, limit):
        status = execution.typed_search_attributes.get(sa.AGENT_EXECUTION_STATUS)
        if status in ages:
            ages[status].append((now - execution.start_time).total_seconds())
    return [
        StatusCount(status, len(values), sum(values) / len(values) if values else 0.0)
        for status, values in ages.items()
    ]


async def waiting(client: Client, *, now: datetime | None = None, limit: int = 1_000) -> list[WaitingRun]:
    """Seed: the runs in WAITING, ordered by waitingUntil."""
    return _waiting_rows(await _list(client, WAITING, limit), now or datetime.now(UTC))


async def stuck(client: Client, *, now: datetime | None = None, limit: int = 1_000) -> list[WaitingRun]:
    """Runs that do not move on their own: still WAITING after their waitingUntil (the seed's
    query: a timeout that was never processed), then runs whose workflow task keeps failing."""
    now = now or datetime.now(UTC)
    late = [
        replace(row, problem=PAST_DEADLINE)
        for row in _waiting_rows(await _list(client, stuck_selection(now), limit), now)
    ]
    failing = []
    for row in _waiting_rows(await _list(client, FAILING, limit), now):
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
        llm_tokens: What its model calls spent in tokens, as of its last wait or its end
            (None: no model call yet). `RunHandle.status` has the live figure.
        llm_cost_usd: The same in US dollars, at the worker's price table.
    """

    run_id: str
    agent: str
    status: str
    waiting_for: str | None
    waiting_until: datetime | None
    started_at: datetime
    closed_at: datetime | None
    workflow_version: str
    llm_tokens: int | None = None
    llm_cost_usd: float | None = None


def runs_selection(
    query: str | None = None, *, status: str | None = None, agent: str | None = None, waiting_for: str | None = None
) -> Selection:
    """What `DsmoClient.runs` selects: the filters, AND-ed with ``query`` (Temporal's syntax).

    An active status selects open runs only (a run terminated from outside keeps its last
    status); a terminal one, ended runs only.

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
    clauses = []
    scope = Scope.ANY
    if status:
        clauses.append(f"AgentExecutionStatus='{status}'")
        scope = Scope.OPEN if RunStatus(status) in ACTIVE else Scope.ENDED
    if waiting_for:
        clauses.append(f"WaitingFor='{waiting_for}'")
    if agent:
        clauses.append(f"AgentName='{agent}'")
    return Selection(query or None, " AND ".join(clauses) or None, scope)


def runs_query(
    query: str | None = None, *, status: str | None = None, agent: str | None = None, waiting_for: str | None = None
) -> str:
    """The `temporal workflow list --query` that lists what `DsmoClient.runs` does (see `runs_selection`)."""
    return current_filter(runs_selection(query, status=status, agent=agent, waiting_for=waiting_for))


def run_summary(execution: WorkflowExecution) -> RunSummary:
    """A visibility row as a `RunSummary`."""
    attrs = execution.typed_search_attributes
    waiting_for = attrs.get(sa.WAITING_FOR)
    status = attrs.get(sa.AGENT_EXECUTION_STATUS) or RunStatus.PENDING.value
    # A run Temporal closed itself keeps its last status in visibility (no workflow code ran).
    closed = closed_around_status(execution.status) if status in ACTIVE else None
    return RunSummary(
        run_id=execution.id,
        agent=attrs.get(sa.AGENT_NAME) or "",
        status=closed.value if closed else status,
        waiting_for=None if closed else waiting_for,
        waiting_until=None if closed else attrs.get(sa.WAITING_UNTIL),
        started_at=execution.start_time,
        closed_at=execution.close_time,
        workflow_version=attrs.get(sa.WORKFLOW_VERSION) or "",
        llm_tokens=attrs.get(sa.LLM_TOKENS),
        llm_cost_usd=attrs.get(sa.LLM_COST_USD),
    )
