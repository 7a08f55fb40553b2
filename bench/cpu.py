"""CPU time of the processes a run costs: this one (client and workers), Temporal, the S3 store.

On two cores throughput is bought with CPU, so the floor comparison reports where each run's
CPU goes; the servers are found by the ports they listen on, as a stack reused from
`make up` has no pid file of ours.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import psutil  # type: ignore[import-untyped]

from dsmo.config.settings import Settings


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds process ``pid`` has used; 0 for no process or one that is gone."""
    if pid is None:
        return 0.0
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def listening_pid(port: int) -> int | None:
    for connection in psutil.net_connections(kind="tcp"):
        if connection.laddr and connection.laddr.port == port and connection.status == "LISTEN" and connection.pid:
            return int(connection.pid)
    return None


@dataclass
class CpuMeter:
    """Cumulative user + system CPU seconds per process, by role."""

    processes: dict[str, psutil.Process] = field(default_factory=dict)

    @classmethod
    def for_stack(cls, settings: Settings) -> CpuMeter:
        meter = cls({"python": psutil.Process(os.getpid())})
        for role, port in (("temporal", settings.temporal.port), ("s3", settings.store.port)):
            try:
                pid = listening_pid(port)
            except psutil.AccessDenied:  # other users' sockets: measure what we can
                pid = None
            if pid is not None and pid != os.getpid():
                meter.processes[role] = psutil.Process(pid)
        return meter

    def sample(self) -> dict[str, float]:
        seconds = {}
        for role, process in self.processes.items():
            try:
                times = process.cpu_times()
            except psutil.Error:  # it went away: nothing more to count
                continue
            seconds[role] = float(times.user + times.system)
        return seconds


def per_run_ms(before: dict[str, float], after: dict[str, float], runs: int) -> dict[str, float]:
    """CPU milliseconds per run and role between two samples."""
    return {role: (after[role] - before[role]) * 1000 / runs for role in before if role in after and runs}
