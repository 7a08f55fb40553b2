"""The run state machine of the seed, as one pure transition function.

PENDING -> RUNNING | CANCELLED
RUNNING -> WAITING | COMPLETED | FAILED | CANCELLED
WAITING -> RUNNING | TIMEOUT | CANCELLED
COMPLETED, FAILED, TIMEOUT, CANCELLED are terminal.
"""

from __future__ import annotations

from enum import StrEnum

from dsmo.workflows.common.errors import IllegalTransition


class RunStatus(StrEnum):
    """A run's status; changes follow the status table (`next_status`)."""

    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.TIMEOUT, RunStatus.CANCELLED})

LEGAL: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.PENDING: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED}),
    RunStatus.RUNNING: frozenset({RunStatus.WAITING, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED}),
    RunStatus.WAITING: frozenset({RunStatus.RUNNING, RunStatus.TIMEOUT, RunStatus.CANCELLED}),
    RunStatus.COMPLETED: frozenset(),
    RunStatus.FAILED: frozenset(),
    RunStatus.TIMEOUT: frozenset(),
    RunStatus.CANCELLED: frozenset(),
}


def next_status(current: RunStatus, target: RunStatus) -> RunStatus:
    """``target`` if the seed's table allows ``current -> target``, else IllegalTransition."""
    if target not in LEGAL[current]:
        allowed = ", ".join(sorted(LEGAL[current])) or "nothing (terminal)"
        raise IllegalTransition(f"status {current} cannot change to {target} (allowed: {allowed})")
    return target
