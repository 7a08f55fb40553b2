"""The visibility queries the client lists runs with (`DsmoClient.runs`, `dsmo runs ...`)."""

from __future__ import annotations

from datetime import UTC, datetime

from dsmo.starter.client.monitoring import runs_query, stuck_query


def test_runs_query_ands_the_filters_with_the_callers_query() -> None:
    assert runs_query() == "WorkflowType='AgentExecution'"
    assert runs_query("StartTime > '2026-01-01T00:00:00Z'", agent="triage", waiting_for="response") == (
        "WorkflowType='AgentExecution' AND WaitingFor='response' AND AgentName='triage' "
        "AND (StartTime > '2026-01-01T00:00:00Z')"
    )


def test_an_active_status_leaves_out_runs_terminated_from_outside() -> None:
    # A run terminated with `temporal workflow terminate` keeps its last AgentExecutionStatus.
    assert runs_query(status="waiting").endswith("AgentExecutionStatus='waiting' AND ExecutionStatus='Running'")
    assert runs_query(status="completed") == "WorkflowType='AgentExecution' AND AgentExecutionStatus='completed'"


def test_stuck_means_waiting_past_the_deadline() -> None:
    query = stuck_query(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert query.endswith("AgentExecutionStatus='waiting' AND WaitingUntil < '2026-01-02T03:04:05Z'")
