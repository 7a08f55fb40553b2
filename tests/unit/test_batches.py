"""The batch runner without a server: the report's summary and JSON, a per-run error that does not
stop the batch, the limit, the concurrency bound, and pacing on an injected clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import TypedSearchAttributes

from dsmo.client.batches import BatchReport, Pacer, RunOutcome, reason_class, run_batch
from dsmo.client.bulk_operations import batch_event_id, bulk_cancel, default_batch_id, refusal
from dsmo.client.client_errors import InvalidQuery
from dsmo.client.core import ClientCore
from dsmo.config.settings import Settings
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import MAX_EVENT_ID


@dataclass
class Listed:
    """A visibility row that agrees with Temporal's own record (see tests/unit/test_run_selection.py)."""

    id: str
    run_id: str = "current"
    status: WorkflowExecutionStatus = WorkflowExecutionStatus.RUNNING
    typed_search_attributes: TypedSearchAttributes = TypedSearchAttributes.empty


@dataclass
class FakeTemporal:
    run_ids: list[str]
    queries: list[str] = field(default_factory=list)
    read: int = 0  # how many rows the batch has taken from the listing so far

    async def list_workflows(self, query: str, limit: int | None = None) -> AsyncIterator[Listed]:
        self.queries.append(query)
        for run_id in self.run_ids:
            self.read += 1
            yield Listed(run_id)

    def get_workflow_handle(self, run_id: str) -> Any:
        async def describe() -> Listed:
            return Listed(run_id)

        return SimpleNamespace(describe=describe)


@dataclass
class FakeClient:
    temporal: FakeTemporal
    settings: Settings = field(default_factory=Settings)


def client(*run_ids: str) -> ClientCore:
    return cast(ClientCore, FakeClient(FakeTemporal(list(run_ids))))


async def acted(run_id: str) -> RunOutcome:
    return RunOutcome(run_id, "done")


def report_of(*outcomes: RunOutcome) -> BatchReport:
    return BatchReport("migrate", "AgentName='a'", False, datetime(2026, 11, 26, tzinfo=UTC), None, list(outcomes))


def test_the_summary_counts_outcomes_and_groups_refusals_by_their_first_part() -> None:
    report = report_of(
        RunOutcome("a", "done"),
        RunOutcome("b", "refused", "node review: no counterpart in version 2"),
        RunOutcome("c", "refused", "node intake: no counterpart in version 2"),
        RunOutcome("d", "refused", "variable: city is missing"),
        RunOutcome("e", "skipped", "already ended"),
        RunOutcome("f", "failed", "RPCError: boom"),
    )
    assert report.summary() == {
        "done": 1,
        "would": 0,
        "skipped": 1,
        "refused": 3,
        "failed": 1,
        "refusedByReason": {"node review": 1, "node intake": 1, "variable": 1},
        "total": 6,
    }
    assert reason_class("no colon here") == "no colon here" and reason_class(None) == "unknown"


def test_the_json_report_is_camel_case_with_the_summary_and_every_run() -> None:
    report = report_of(RunOutcome("a", "would", "would cancel", {"eventId": "b1:a"}))
    report.finished_at = datetime(2026, 11, 26, 0, 1, tzinfo=UTC)
    body = report.to_json()
    assert body == {
        "operation": "migrate",
        "query": "AgentName='a'",
        "dryRun": False,
        "startedAt": "2026-11-26T00:00:00+00:00",
        "finishedAt": "2026-11-26T00:01:00+00:00",
        "summary": report.summary(),
        "runs": [{"runId": "a", "outcome": "would", "reason": "would cancel", "detail": {"eventId": "b1:a"}}],
    }


async def test_an_error_in_one_run_is_its_failed_outcome_and_the_batch_goes_on() -> None:
    async def per_run(run_id: str) -> RunOutcome:
        if run_id == "r2":
            raise RuntimeError("the store is down\nsecond line")
        return RunOutcome(run_id, "done")

    seen: list[str] = []
    report = await run_batch(
        client("r1", "r2", "r3"), "cancel", "AgentName='a'", per_run, on_outcome=lambda o: seen.append(o.run_id)
    )
    outcomes = {o.run_id: (o.outcome, o.reason) for o in report.outcomes}
    assert outcomes == {"r1": ("done", None), "r2": ("failed", "RuntimeError: the store is down"), "r3": ("done", None)}
    assert sorted(seen) == ["r1", "r2", "r3"] and report.finished_at is not None
    assert report.query == "AgentName='a'"


async def test_runs_are_selected_among_agent_executions_with_the_operations_scope() -> None:
    fake = client("r1")
    await run_batch(fake, "redrive", "AgentName='a'", acted, scope="AgentExecutionStatus='failed'")
    assert cast(FakeClient, fake).temporal.queries == [
        "WorkflowType='AgentExecution' AND AgentExecutionStatus='failed' AND (AgentName='a')"
    ]


@pytest.mark.parametrize("query", ["", "   ", "\n\t"], ids=["empty", "blank", "whitespace"])
async def test_an_empty_filter_is_refused_before_visibility_is_read(query: str) -> None:
    # With only DSMO's clauses left, an empty filter would select every run of every agent.
    fake = client("r1")
    with pytest.raises(InvalidQuery, match=r"^--query: must not be empty \(to select every run, say so"):
        await run_batch(fake, "cancel", query, acted)
    assert cast(FakeClient, fake).temporal.queries == []


@pytest.mark.parametrize("reason", ["", "  "], ids=["empty", "blank"])
async def test_a_bulk_cancel_without_a_reason_is_refused_before_visibility_is_read(reason: str) -> None:
    # A blank reason is recorded as if Temporal had cancelled the runs ("cancellation requested through Temporal").
    fake = client("r1")
    with pytest.raises(DsmoError, match=r"^--reason: say why the runs are cancelled"):
        await bulk_cancel(fake, "AgentName='a'", reason=reason)
    assert cast(FakeClient, fake).temporal.queries == []


async def test_the_limit_stops_reading_the_listing() -> None:
    fake = client(*[f"r{i}" for i in range(10)])
    report = await run_batch(fake, "cancel", "AgentName='a'", acted, limit=3)
    assert sorted(o.run_id for o in report.outcomes) == ["r0", "r1", "r2"]
    assert cast(FakeClient, fake).temporal.read == 3  # no row read past the limit


async def test_at_most_concurrency_runs_are_in_flight() -> None:
    in_flight, most = 0, 0
    release = asyncio.Event()

    async def per_run(run_id: str) -> RunOutcome:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        if in_flight == 2:
            release.set()
        await release.wait()
        in_flight -= 1
        return RunOutcome(run_id, "done")

    report = await run_batch(client(*[f"r{i}" for i in range(6)]), "cancel", "x='y'", per_run, concurrency=2)
    assert most == 2 and len(report.outcomes) == 6


async def test_pacing_spaces_starts_by_one_over_the_rate_without_bursting_after_a_pause() -> None:
    now = 0.0
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        nonlocal now
        slept.append(seconds)
        now += seconds

    pacer = Pacer(4.0, clock=lambda: now, sleep=sleep)
    starts = []
    for _ in range(3):
        await pacer.wait()
        starts.append(now)
    assert starts == [0.0, 0.25, 0.5]
    now += 10.0  # a long pause (slow runs): the next start is not followed by a burst
    await pacer.wait()
    await pacer.wait()
    assert slept == [0.25, 0.25, 0.25] and now == 10.75


async def test_no_rate_means_no_waiting() -> None:
    async def never(seconds: float) -> None:
        raise AssertionError("slept")

    pacer = Pacer(None, sleep=never)
    for _ in range(3):
        await pacer.wait()


def test_a_rate_of_zero_is_named() -> None:
    with pytest.raises(ValueError, match="rate"):
        Pacer(0)


async def test_bad_limit_and_concurrency_are_named() -> None:
    with pytest.raises(ValueError, match="limit"):
        await run_batch(client(), "cancel", "x='y'", acted, limit=0)
    with pytest.raises(ValueError, match="concurrency"):
        await run_batch(client(), "cancel", "x='y'", acted, concurrency=0)


def test_a_batch_gives_each_run_its_own_stable_event_id_within_the_id_rules() -> None:
    assert batch_event_id("office-closed", "run-1") == "office-closed:run-1"
    long_id = batch_event_id("b" * 150, "r" * 100)
    assert len(long_id) <= MAX_EVENT_ID and long_id == batch_event_id("b" * 150, "r" * 100)
    assert long_id != batch_event_id("b" * 150, "r" * 99 + "s")
    same: dict[str, Any] = {"result": "cancelled"}
    assert default_batch_id("EVENT_COMPLETED", same, "q") == default_batch_id("EVENT_COMPLETED", dict(same), "q")
    assert default_batch_id("EVENT_COMPLETED", same, "q") != default_batch_id("EVENT_COMPLETED", same, "q2")


def test_a_refusal_names_what_the_run_was_doing_first_so_refusals_group_by_it() -> None:
    text = "run r-1 is waiting for response and no wait ahead takes a event; EVENT_COMPLETED was not applied"
    assert refusal(text, "r-1") == "waiting for response: no wait ahead takes a event; EVENT_COMPLETED was not applied"
    other = "MESSAGE_RECEIVED.from: 'x' is not the sender wait expects ('y')"
    assert refusal(other, "r-1") == other and reason_class(other) == "MESSAGE_RECEIVED.from"


def test_each_run_gets_one_line_and_the_batch_a_summary() -> None:
    from dsmo.cli.bulk_commands import outcome_line, summary_line

    assert outcome_line("cancel", RunOutcome("r1", "done", "cancel requested")) == "cancelled r1 (cancel requested)"
    assert outcome_line("cancel", RunOutcome("r2", "would")) == "would cancel r2"
    assert outcome_line("redrive", RunOutcome("r3", "would", "r3/bill")) == "would redrive r3 (r3/bill)"
    assert outcome_line("deliver", RunOutcome("r4", "refused", "waiting for response: no")) == (
        "refused r4: waiting for response: no"
    )
    assert outcome_line("deliver", RunOutcome("r5", "skipped", "already delivered")) == "skipped r5: already delivered"
    report = report_of(
        RunOutcome("a", "done"), RunOutcome("b", "refused", "node x: gone"), RunOutcome("c", "failed", "boom")
    )
    assert summary_line(report) == "migrate: 3 run(s): 1 done, 1 refused, 1 failed (refused: node x: 1)"
    report.dry_run, report.outcomes = True, []
    assert summary_line(report) == "migrate (dry run): 0 run(s): none selected"
