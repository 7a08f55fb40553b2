"""The loop every flow-control workflow shares: it lives as long as its key is in use, so it hands
its state over to a new run of itself (continue-as-new) before its history grows long.

A lock, a bucket, a limiter or a debouncer holds only what it needs now (its state is bounded), and
takes signals and updates at any time: it hands over between two of them, once every handler in
flight has finished, so none is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import workflow

# Events in one run of a flow-control workflow before it hands over: small, so a replay after a
# worker restart is quick, and far below Temporal's own limits.
HISTORY_LIMIT = 2_000


async def hand_over_when_long(state: Any, *, ready: Callable[[], bool] = lambda: True) -> None:
    """Continue as new with ``state`` if the history is past `HISTORY_LIMIT`; else return at once.

    Args:
        state: What the next run starts with (its `run` method's argument).
        ready: Asked once the handlers in flight have finished: False leaves the hand-over to a
            later pass (for work that must be done in this run first); it may update ``state``.
    """
    if workflow.info().get_current_history_length() <= HISTORY_LIMIT:
        return
    await workflow.wait_condition(workflow.all_handlers_finished)
    if ready():
        workflow.continue_as_new(state)
