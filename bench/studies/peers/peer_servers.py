"""The servers W6 starts for itself: two PostgreSQL servers from pgserver's wheel, restartable.

One holds the peers' state (a database each for LangGraph and DBOS), the other the ledger, so
the ledger's writes never count as a contender's database work.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]
import psycopg


def _get_server(data_dir: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: no XDG_RUNTIME_DIR on CI machines
        from pgserver.postgres_server import get_server

        return get_server(data_dir, cleanup_mode="stop")


class Postgres:
    """A pgserver PostgreSQL in ``data_dir``: databases by name, its processes' CPU, a restart."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.server = _get_server(data_dir)

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.data_dir}"

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def pid(self) -> int:
        return int((self.data_dir / "postmaster.pid").read_text().split()[0])

    def cpu_seconds(self) -> float:
        """The postmaster's CPU with its children's, live and ended (one backend per connection)."""
        try:
            postmaster = psutil.Process(self.pid())
            times = postmaster.cpu_times()
            total = times.user + times.system + times.children_user + times.children_system
            for child in postmaster.children(recursive=True):
                try:
                    child_times = child.cpu_times()
                except psutil.Error:
                    continue
                total += child_times.user + child_times.system
            return float(total)
        except (psutil.Error, OSError, ValueError):
            return 0.0

    def restart(self) -> None:
        self.server.cleanup()
        self.server = _get_server(self.data_dir)

    def stop(self) -> None:
        self.server.cleanup()
