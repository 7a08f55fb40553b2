"""The last task before continue-as-new starts with every event sent to the run before it.

A run hands over to its next generation from whatever woke it last. When that was a local
activity (the trail segment written at the hand-over, or a local stage), its result is recorded
as a marker, and the marker can reach the server in an earlier task than the hand-over (the
worker answers a query meanwhile, or heartbeats a long task). If Temporal then refuses the task
that continues as new (a cancel arrived while it ran), the retried task replays the marker and
resolves the activity on its own, before the cancel is delivered: the run hands over again and
the cancel is left behind on the old execution, so the run never ends. A round trip to the
server first (a no-op activity, `dsmo/activities/round_trip.py`) makes the deciding task one the
server started for its completion. A cancel sent before that task is delivered with it; one
sent while the round trip is out wakes the run, which ends cancelled; one sent while the
deciding task runs makes the server refuse the hand-over and deliver the cancel on the retry.

A `migrate` or `rewind` answer is held until that task (`answered`): the caller hears it with
the hand-over done, in the same task, as before this change. A `migrate` that arrives while the
run hands over from between two nodes is decided at the node it hands over at.

A run moved while it waits makes the round trip too, though no result of its own came before
the move. Temporal's Python SDK (legacy job order, its default) runs a task's signals and
updates to a standstill before it applies the task's other jobs, a cancel among them: a move and
a cancel that reach the run in one task (both sent while no worker ran it) would otherwise see
the hand-over made before the cancel is known, and the cancel would stay on the old execution.
The round trip's await lets the cancel through (`test_hand_over_round_trip.py` holds both in
one task). The SDK's single-batch order, which applies every job first, would make it needless.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from dsmo.workflows.common import patches
from dsmo.workflows.contracts.activity_io import HAND_OVER_ROUND_TRIP
from dsmo.workflows.run.activity_calls import raise_if_cancelled
from dsmo.workflows.run.context import Run

# workflow.patched id: the hand-over waits for a round trip; runs from before it hand over at once.
HAND_OVER_ROUND_TRIP_PATCH = "hand-over-after-a-round-trip"
# The round trip answers at once; a worker lost meanwhile (or one without the activity, during
# a rollout) has it tried again soon: the hand-over and any answer it holds wait for it.
ROUND_TRIP_TIMEOUT = timedelta(seconds=10)
ROUND_TRIP_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_interval=timedelta(seconds=1))

Answer = TypeVar("Answer")


def taken() -> bool:
    """Whether this execution hands over after a round trip (asked once; a marker in the history)."""
    return patches.patched(HAND_OVER_ROUND_TRIP_PATCH)


def handlers_idle(run: Run) -> bool:
    """No `migrate` or `rewind` handler is still working (one holding its answer is done)."""
    return run.handlers_busy == 0


async def handlers_done(run: Run, decide_move: Callable[[], Awaitable[None]]) -> None:
    """Wait until no `migrate` or `rewind` handler is working; a move waiting for a node boundary
    is decided at the hand-over's (by ``decide_move``), not left waiting for one that never comes."""
    while not handlers_idle(run):
        await workflow.wait_condition(lambda: handlers_idle(run) or run.migration_asked)
        await decide_move()


async def settle(run: Run, decide_move: Callable[[], Awaitable[None]]) -> None:
    """Make round trips until one comes back with no handler working, then release the held answers.

    Returns in an activation the server started for a round trip's completion, after every
    update handler has finished (each held answer goes out with the hand-over's task).

    Args:
        run: The run handing over.
        decide_move: Decides a `migrate` that waits for a node boundary at the hand-over's node.

    Raises:
        asyncio.CancelledError: The run was cancelled meanwhile.
    """
    while True:
        try:
            await workflow.execute_activity(
                HAND_OVER_ROUND_TRIP, start_to_close_timeout=ROUND_TRIP_TIMEOUT, retry_policy=ROUND_TRIP_RETRY
            )
        except ActivityError as err:
            raise_if_cancelled(err)  # the run's cancel reached the round trip first
            raise
        if handlers_idle(run):
            break
        await handlers_done(run, decide_move)  # one began meanwhile: then go round again
    run.handed_over = True
    await workflow.wait_condition(workflow.all_handlers_finished)


async def answered(run: Run, take: Coroutine[Any, Any, Answer]) -> Answer:
    """A `migrate` or `rewind` handler's answer, held until the run hands over or begins to end.

    Args:
        run: The run the update was sent to.
        take: The handler's work (not begun): while it runs, the hand-over waits for it.

    Returns:
        What ``take`` answered (a refusal it raises goes out at once).
    """
    run.handlers_busy += 1
    try:
        answer = await take
    finally:
        run.handlers_busy -= 1
    if taken():
        await workflow.wait_condition(lambda: run.handed_over or run.boundaries_over is not None)
    return answer
