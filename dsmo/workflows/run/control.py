"""Internal control flow of a run: exceptions that never leave the workflow as themselves."""

from __future__ import annotations

from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import WaitCheckpoint


class RunEnded(Exception):
    """A node ended the run early: FAILED or TIMEOUT, with the seed's record fields."""

    def __init__(self, status: RunStatus, node: str, message: str) -> None:
        super().__init__(message)
        self.status, self.node, self.message = status, node, message


class ContinueAsNewDue(Exception):
    """The history is long: carry the run into a fresh Temporal run at this point."""

    def __init__(self, node: str | None, wait: WaitCheckpoint | None = None) -> None:
        super().__init__(f"continue as new at {node}")
        self.node, self.wait = node, wait


class RouteTo(Exception):
    """A contract violation sends the run to the definition's fail-safe node."""

    def __init__(self, node: str, reason: str) -> None:
        super().__init__(reason)
        self.node, self.reason = node, reason


class ServiceFailed(Exception):
    """An infrastructure activity spent its retry budget before the run's first node."""

    def __init__(self, activity: str, message: str) -> None:
        super().__init__(message)
        self.activity, self.message = activity, message
