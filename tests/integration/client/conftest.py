"""Fixtures the client tests share."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest_asyncio

from tests.conftest import Harness


@pytest_asyncio.fixture
async def cleanup(harness: Harness) -> AsyncIterator[list[str]]:
    """Runs a test leaves open (they never end by themselves, or no worker polls their queue),
    terminated after it."""
    runs: list[str] = []
    yield runs
    for run_id in runs:
        with contextlib.suppress(Exception):  # already closed, or gone
            await harness.dsmo.temporal.get_workflow_handle(run_id).terminate("test over")
