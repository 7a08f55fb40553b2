"""The driver's view of the ledger: when each run's effect and each stage's start were written."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import psycopg

from bench.studies.peers.peer_ledger import EFFECT, START

POLL_S = 0.02


class LedgerWatch:
    """Polls the ledger for effects (runs done) of one contender; futures resolve with their time."""

    def __init__(self, dsn: str, contender: str) -> None:
        self.dsn = dsn
        self.contender = contender
        self.effects: dict[str, float] = {}
        self._waiters: dict[str, asyncio.Future[float]] = {}
        self._task: asyncio.Task[None] | None = None
        self._since = time.time()

    async def __aenter__(self) -> LedgerWatch:
        self._task = asyncio.create_task(self._poll())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _poll(self) -> None:
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            while True:
                cursor = await conn.execute(
                    "SELECT run_id, min(at) FROM ledger WHERE contender = %s AND kind = %s AND at >= %s "
                    "GROUP BY run_id",
                    (self.contender, EFFECT, self._since - 5),
                )
                for run_id, at in await cursor.fetchall():
                    if run_id not in self.effects:
                        self.effects[run_id] = at
                        self._since = max(self._since, at)
                        waiter = self._waiters.pop(run_id, None)
                        if waiter is not None and not waiter.done():
                            waiter.set_result(at)
                await asyncio.sleep(POLL_S)

    async def effect(self, run_id: str, timeout: float) -> float:
        """When ``run_id``'s effect was applied (epoch seconds); waits up to ``timeout``."""
        if run_id in self.effects:
            return self.effects[run_id]
        waiter = self._waiters.setdefault(run_id, asyncio.get_running_loop().create_future())
        return await asyncio.wait_for(asyncio.shield(waiter), timeout)

    async def first(self, run_id: str, stage: str, kind: str = START, timeout: float = 60) -> float:
        """When ``stage`` of ``run_id`` first wrote ``kind`` (polled: for a few runs at a time)."""
        deadline = time.monotonic() + timeout
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            while time.monotonic() < deadline:
                cursor = await conn.execute(
                    "SELECT min(at) FROM ledger WHERE run_id = %s AND stage = %s AND kind = %s", (run_id, stage, kind)
                )
                row: Any = await cursor.fetchone()
                if row and row[0] is not None:
                    return float(row[0])
                await asyncio.sleep(POLL_S)
        raise TimeoutError(f"{run_id}: no {kind} row for stage {stage} within {timeout:.0f} s")
