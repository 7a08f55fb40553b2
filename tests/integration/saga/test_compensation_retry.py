"""A failed compensation is retried durably at the seed's real intervals (1, 2, 4, 8, 16 minutes),
shown on Temporal's time-skipping server."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.saga.compensation_retry import CompensationRetryState
from dsmo_examples.orders.db import OrderDatabase, payments
from tests.conftest import Harness, definition_from, start_time_skipping

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
ORDER = {
    "order": {
        "customer": "ana",
        "productId": "lamp",
        "quantity": 1,
        "amount": 10.0,
        "card": "4242",
        "address": "nowhere",
    }
}


@pytest_asyncio.fixture
async def time_env() -> AsyncIterator[WorkflowEnvironment]:
    """A fresh time-skipping server per test: its clock is moved by hand across several workflows."""
    env = await start_time_skipping()
    try:
        yield env
    finally:
        await env.shutdown()


async def retry_history(env: WorkflowEnvironment, retry_id: str) -> CompensationRetryState:
    state: CompensationRetryState = await env.client.get_workflow_handle(retry_id).query(
        "status", result_type=CompensationRetryState
    )
    return state


async def advance(env: WorkflowEnvironment, by: timedelta, retry_id: str, attempts: int) -> CompensationRetryState:
    """Move the clock by ``by``, then wait until the retry's ``attempts``-th attempt has finished.

    The attempt that became due runs on the worker in real time: the clock only moves on once
    its outcome is recorded, with the time it happened at (the timeout is a hang guard).
    """
    await env.sleep(by)
    deadline = asyncio.get_running_loop().time() + 60
    while len((state := await retry_history(env, retry_id)).history) < attempts:  # one entry per finished attempt
        assert asyncio.get_running_loop().time() < deadline, f"attempt {attempts} never ran: {state}"
        await asyncio.sleep(0.1)
    return state


async def test_compensation_fails_twice_then_succeeds(
    skipping: Harness, time_env: WorkflowEnvironment, order_db: OrderDatabase
) -> None:
    order_db.inject_fault("refund", 2)  # down for the unwind's attempt and the first retry
    run_id = await skipping.start(definition_from(EXAMPLES / "order_saga.yaml"), ORDER)
    result = await skipping.dsmo.result(run_id)
    assert result.status is RunStatus.FAILED and result.compensation is not None
    assert result.compensation["status"] == "partial"
    retry_id = result.compensation["failed"][0]["retriedBy"]
    assert order_db.row(payments, run_id)["status"] == "captured"  # type: ignore[index]

    state = await advance(time_env, timedelta(minutes=1, seconds=5), retry_id, 2)  # retry 1 at +1 min: still failing
    assert (state.status, state.attempts) == ("retrying", 2)
    await advance(time_env, timedelta(minutes=2), retry_id, 3)  # retry 2 at +3 min: succeeds
    handle = time_env.client.get_workflow_handle(retry_id, result_type=CompensationRetryState)
    state = await handle.result()
    assert (state.status, state.attempts) == ("succeeded", 3)
    attempts_at = [entry["at"] for entry in state.history]
    gaps = [(_parse(b) - _parse(a)).total_seconds() / 60 for a, b in itertools.pairwise(attempts_at)]
    assert [round(gap) for gap in gaps] == [1, 2], state.history  # 1 min before retry 1, then 2 min before retry 2
    assert order_db.row(payments, run_id)["status"] == "refunded"  # type: ignore[index]
    assert order_db.stock("lamp") == (10, 0)  # everything consistent in the end


async def test_retries_follow_1_2_4_8_16_minutes_then_fail_for_good(
    skipping: Harness, time_env: WorkflowEnvironment, order_db: OrderDatabase
) -> None:
    order_db.inject_fault("refund", 100)
    run_id = await skipping.start(definition_from(EXAMPLES / "order_saga.yaml"), ORDER)
    result = await skipping.dsmo.result(run_id)
    retry_id = result.compensation["failed"][0]["retriedBy"]  # type: ignore[index]
    for retry, minutes in enumerate((1, 2, 4, 8), start=1):
        await advance(time_env, timedelta(minutes=minutes, seconds=1), retry_id, retry + 1)
    # The test server's sleep may not return once a workflow fails under it: skip the last
    # 16 minutes while awaiting the failure instead.
    last = asyncio.ensure_future(time_env.sleep(timedelta(minutes=16, seconds=1)))
    try:
        with pytest.raises(WorkflowFailureError):
            await time_env.client.get_workflow_handle(retry_id).result()
    finally:
        last.cancel()
    state = await retry_history(time_env, retry_id)
    assert (state.status, state.attempts) == ("failed", 6)  # the unwind's attempt + 5 retries
    moments = [_parse(entry["at"]) for entry in state.history]
    gaps = [round((b - a).total_seconds() / 60) for a, b in itertools.pairwise(moments)]
    assert gaps == [1, 2, 4, 8, 16]


def _parse(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text)
