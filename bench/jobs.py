"""Running a batch of jobs at a bounded concurrency."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any


async def bounded(limit: int, jobs: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Run ``jobs`` at most ``limit`` at a time; their results in order."""
    gate = asyncio.Semaphore(limit)

    async def one(job: Callable[[], Awaitable[Any]]) -> Any:
        async with gate:
            return await job()

    return await asyncio.gather(*(one(job) for job in jobs))
