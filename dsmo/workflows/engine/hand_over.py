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

A run moved or rewound while it waits needs no round trip (`at_once`): the task its update
arrived in decides the move and hands over, with nothing awaited in between, as it carries its
trail's tail in the checkpoint (`trail_segments.tail_carried`) instead of writing a segment. If
Temporal refuses that task, the retry delivers the update again, with every event sent since
(a cancel among them), so the move cannot be made without it. Only a wait that was asleep counts:
one that began with the move already due, or whose move waited for the run to reach the wait,
may have been reached from a local result, and makes the round trip.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from dsmo.workflows.changes import run_migration
from dsmo.workflows.common import patches
from dsmo.workflows.contracts.activity_io import HAND_OVER_ROUND_TRIP
from dsmo.workflows.contracts.run_records import WaitCheckpoint
from dsmo.workflows.run.activity_calls import raise_if_cancelled
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.trail_segments import tail_carried, write_segment

# workflow.patched id: the hand-over waits for a round trip; runs from before it hand over at once.
HAND_OVER_ROUND_TRIP_PATCH = "hand-over-after-a-round-trip"
# workflow.patched id: a move decided as its update arrives hands over in that task (`at_once`).
HAND_OVER_AT_ONCE_PATCH = "move-hands-over-at-once"
# The round trip answers at once; a worker lost meanwhile (or one without the activity, during
# a rollout) has it tried again soon: the hand-over and any answer it holds wait for it.
ROUND_TRIP_TIMEOUT = timedelta(seconds=10)
ROUND_TRIP_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_interval=timedelta(seconds=1))

Answer = TypeVar("Answer")


def taken() -> bool:
    """Whether this execution hands over after a round trip (asked once; a marker in the history)."""
    return patches.patched(HAND_OVER_ROUND_TRIP_PATCH)


async def at_once(run: Run, *, woken: bool) -> bool:
    """Hand over in this task, when a move or rewind decided by its update's arrival woke the run's wait.

    Args:
        run: The run handing over.
        woken: The wait the run hands over from was asleep when an event woke it.

    Returns:
        Whether the run hands over now (the held answers released, every handler done); False
        when it makes the round trip first (`settle`).
    """
    moved = run.migration is not None and run.migration.on_arrival and run.rewind is None
    rewound = run.rewind is not None and run.migration is None
    if not (woken and (moved or rewound) and handlers_idle(run) and not run.migration_asked):
        return False
    if not tail_carried(run) or not patches.patched(HAND_OVER_AT_ONCE_PATCH):
        return False
    run.handed_over = True
    await workflow.wait_condition(workflow.all_handlers_finished)
    return True


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


async def after_a_round_trip(run: Run, node: str | None, wait: WaitCheckpoint | None) -> None:
    """Decide a move due at the hand-over's place, write the trail's segment, make the round trip.

    Args:
        run: The run handing over.
        node: The node it hands over at.
        wait: Its wait there, if it waits.

    Raises:
        asyncio.CancelledError: The run was cancelled meanwhile.
    """
    await run_migration.at_boundary(run, node, wait)
    if run.migration is None and run.replay_move_due(node, waiting=wait is not None):
        run_migration.as_recorded(run, node, wait)
    round_trip_first = taken()
    decide_move = functools.partial(run_migration.at_boundary, run, node, wait)
    if round_trip_first:
        await handlers_done(run, decide_move)
    else:
        await workflow.wait_condition(workflow.all_handlers_finished)
    await write_segment(run)
    # Events recorded by handlers while the segment was written stay in the tail.
    if round_trip_first:
        await settle(run, decide_move)
    else:
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
