"""Per-key concurrency proven under load: 1,000 starts over 50 keys with one slot each, three
workers, one SIGKILLed midway. Every key's line is checked from the runs' trails and the locks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bench.reliability.keyed_crash import keyed_crash
from bench.reliability.stack import FaultStack
from dsmo.client.dsmo_client import DsmoClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest_asyncio.fixture
async def fault_stack(tmp_path: Path) -> AsyncIterator[tuple[FaultStack, DsmoClient]]:
    stack = FaultStack(tmp_path / "keyed")
    try:
        client = await stack.start()
        yield stack, client
    finally:
        stack.down()


async def test_no_key_ever_has_two_runs_at_once_through_a_worker_crash(
    fault_stack: tuple[FaultStack, DsmoClient],
) -> None:
    stack, client = fault_stack
    result = await keyed_crash(stack, client, runs=1_000, keys=50, workers=3)
    assert result.problems == []
    assert result.in_flight > 0  # the kill struck while runs were open (in line, or in their stage)
    assert (result.completed, result.lost) == (1_000, 0)
    assert (result.overlaps, result.out_of_order, result.leaked) == (0, 0, 0)
