"""Reads of a peer's own PostgreSQL state (LangGraph's checkpoints and jobs, DBOS's system rows):
whether a run waits, which runs failed, how many bytes a run left."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg


class StateReader:
    """Reads of a peer's own state database over one kept connection (apart from starts and replies)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    async def exists(self, query: str, key: str) -> bool:
        """Whether ``query`` (one ``%s`` for ``key``) finds a row; False while the database restarts."""
        return await asyncio.to_thread(self._exists, query, key)

    def _exists(self, query: str, key: str) -> bool:
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self.dsn, autocommit=True)
                return self._conn.execute(query, (key,)).fetchone() is not None
            except psycopg.Error:  # restarting, or its tables not made yet: not waiting, ask again
                if self._conn is not None:
                    self._conn.close()
                return False


def ids(dsn: str, query: str, run_ids: list[str]) -> set[str]:
    """The ids ``query`` returns (its first column) that are among ``run_ids``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {str(row[0]) for row in conn.execute(query).fetchall()} & set(run_ids)


def row_bytes(dsn: str, tables: tuple[str, ...], column: str, key: str) -> int:
    """Bytes of the rows of ``tables`` whose ``column`` is ``key`` (one run's state)."""
    total = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in tables:
            row = conn.execute(
                f"SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM {table} t WHERE {column} = %s", (key,)
            ).fetchone()
            total += int(row[0]) if row else 0
    return total
