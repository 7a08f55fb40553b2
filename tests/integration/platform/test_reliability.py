"""Faults injected into the real stack: a killed worker, a killed Temporal server, a stopped S3 store.

Each test breaks a private stack of its own (never the session's), waits for recovery, and
counts what the outside world holds: nothing lost, nothing applied twice, nothing orphaned.
`make reliability` runs the same scenarios with larger counts and tabulates them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bench.reliability import scenarios
from bench.reliability.stack import FaultStack
from dsmo.client.dsmo_client import DsmoClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest_asyncio.fixture(scope="module")
async def fault_stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[FaultStack, DsmoClient]]:
    stack = FaultStack(Path(tmp_path_factory.mktemp("faults")))
    try:
        client = await stack.start()
        yield stack, client
    finally:
        stack.down()


def assert_clean(result: scenarios.ScenarioResult) -> None:
    tally = result.tally
    assert (tally.lost, tally.duplicates, tally.orphans, tally.broken_trails) == (0, 0, 0, 0), tally.problems


async def test_worker_sigkill_mid_runs_loses_and_repeats_nothing(fault_stack: tuple[FaultStack, DsmoClient]) -> None:
    stack, client = fault_stack
    result = await scenarios.worker_crash(stack, client, runs=100)
    # The scenario holds its last runs in their first stage until the kill: they are open, in flight.
    assert result.in_flight >= scenarios.CRASH_HELD
    assert result.tally.completed == 100
    assert_clean(result)
    # The kill interrupted stages in flight; they ran again on the new worker, and were absorbed.
    assert result.tally.re_executions >= scenarios.CRASH_HELD


async def test_temporal_killed_with_runs_waiting_resumes_every_run(
    fault_stack: tuple[FaultStack, DsmoClient],
) -> None:
    stack, client = fault_stack
    result = await scenarios.temporal_restart(stack, client, runs=100)
    assert result.tally.completed == 100
    assert_clean(result)


async def test_s3_outage_retries_through_and_dead_letters_only_exhausted_budgets(
    fault_stack: tuple[FaultStack, DsmoClient],
) -> None:
    stack, client = fault_stack
    result = await scenarios.s3_outage(stack, client, runs=24, outage_s=30, short_share=0.25)
    assert_clean(result)
    assert result.downtime_s >= 30
    # Every run's first stage was held until the store was down: all 24 met the outage.
    assert result.in_flight == 24
    # The 18 runs with a budget above the outage all completed; the 6 below it ended in the
    # dead-letter store, one letter each.
    assert (result.tally.completed, result.tally.failed, result.dead_letters) == (18, 6, 6), result.tally.problems
