"""Table 1's server restarts: once per workload W3 and W4, mid-workload, each mode's server dies.

B3's side is the Temporal server: SIGKILLed and started again on the same SQLite file, as the
reliability study does (`bench/reliability/stack.py`), which only a stack the bench started
itself allows (the developer's `make up` stack is never killed: the restart is then skipped and
reported as such). The queue modes' side is their PostgreSQL: stopped in immediate mode (every
server process aborted, no checkpoint: a crash, recovered from the WAL at the next start) and
started again. The restart strikes once half the workload's inputs have started (`due`), while
runs are in flight; the bench's calls ride it out (`bench.b3_process.riding_out`,
`bench.reconnecting`), and what it costs shows in the runs' figures.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dsmo.devstack.stack import DevStack

RESTARTED = frozenset({"W3", "W4"})
TEMPORAL, POSTGRES = "temporal", "postgres"


def due(workload: str, started: int, total: int) -> bool:
    """Whether the workload's restart strikes now: in W3 and W4, once half its inputs have started."""
    return workload in RESTARTED and total > 0 and started >= max(1, total // 2)


def server_of(mode: str) -> str:
    """The server a mode's runs depend on: Temporal for B3, the queue's PostgreSQL for the others."""
    return TEMPORAL if mode == "B3" else POSTGRES


@dataclass(frozen=True)
class Restart:
    """One restart as it happened (``down_s`` None: skipped, for ``reason``)."""

    server: str
    down_s: float | None
    reason: str = ""

    @property
    def count(self) -> int:
        """1 if the server was restarted, 0 if it was skipped."""
        return 0 if self.down_s is None else 1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class ServerRestarts:
    """Restarts each mode's server: Temporal through ``devstack`` (None: not the bench's own stack,
    never restarted), the queue's PostgreSQL in ``postgres_dir``."""

    def __init__(self, devstack: DevStack | None, postgres_dir: Path) -> None:
        self.devstack, self.postgres_dir = devstack, postgres_dir

    async def restart(self, mode: str) -> Restart:
        """Kill the server of ``mode`` and start it again; how long it was away."""
        began = time.monotonic()
        if server_of(mode) == POSTGRES:
            await asyncio.to_thread(restart_postgres, self.postgres_dir)
            return Restart(POSTGRES, round(time.monotonic() - began, 2))
        if self.devstack is None:
            return Restart(TEMPORAL, None, "the stack was not started by the bench (make up): not killed")
        if not await asyncio.to_thread(self.devstack.temporal.kill):
            return Restart(TEMPORAL, None, "the Temporal server was not the bench's process")
        await self.devstack.up(timeout=120)
        return Restart(TEMPORAL, round(time.monotonic() - began, 2))


def restart_postgres(data_dir: Path) -> None:
    """Crash the PostgreSQL server pgserver runs in ``data_dir`` (immediate stop) and start it again."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: no XDG_RUNTIME_DIR on CI machines
        from pgserver.postgres_server import get_server, pg_ctl  # type: ignore[attr-defined]

    server = get_server(data_dir, cleanup_mode="stop")  # the handle `queue_db.postgres` opened
    pg_ctl(["-m", "immediate", "-w", "stop"], pgdata=server.pgdata, user=server.system_user)
    with server._lock:
        server.ensure_postgres_running()
