"""The visibility queries the client lists runs with (`DsmoClient.runs`, `dsmo runs ...`)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dsmo.client.monitoring import runs_query, stuck_query


def test_runs_query_ands_the_filters_with_the_callers_query_last() -> None:
    # Earlier generations of a run that continued as new are never listed: their rows keep
    # the version, status and wait the run had then.
    assert runs_query() == "WorkflowType='AgentExecution' AND ExecutionStatus != 'ContinuedAsNew'"
    assert runs_query("StartTime > '2026-01-01T00:00:00Z'", agent="triage", waiting_for="response") == (
        "WorkflowType='AgentExecution' AND ExecutionStatus != 'ContinuedAsNew' AND WaitingFor='response' "
        "AND AgentName='triage' AND (StartTime > '2026-01-01T00:00:00Z')"
    )


def test_an_active_status_selects_open_runs_and_a_terminal_one_ended_runs() -> None:
    # A run terminated with `temporal workflow terminate` keeps its last AgentExecutionStatus.
    assert runs_query(status="waiting") == (
        "WorkflowType='AgentExecution' AND ExecutionStatus = 'Running' AND AgentExecutionStatus='waiting'"
    )
    assert runs_query(status="completed") == (
        "WorkflowType='AgentExecution' AND ExecutionStatus NOT IN ('Running', 'ContinuedAsNew') "
        "AND AgentExecutionStatus='completed'"
    )


def test_stuck_means_waiting_past_the_deadline() -> None:
    query = stuck_query(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert query.endswith("AgentExecutionStatus='waiting' AND WaitingUntil < '2026-01-02T03:04:05Z'")


@pytest.mark.parametrize(
    ("filters", "named"),
    [
        ({"status": "done' OR 'x'='x"}, "status"),
        ({"agent": "x' OR AgentName!='"}, "agent"),
        ({"waiting_for": "response' OR '1'='1"}, "waiting_for"),
    ],
)
def test_a_filter_that_is_not_its_kind_of_value_is_refused_not_quoted_into_the_query(
    filters: dict[str, str], named: str
) -> None:
    with pytest.raises(ValueError, match=f"^{named}: "):
        runs_query(**filters)
