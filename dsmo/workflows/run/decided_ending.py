"""Work that settles the ending a run has decided, carried past a cancel that lands meanwhile.

Once a run has decided how it ends (its graph's end, a failure, a spent service budget), a cancel
that reaches it is too late to change that ending. It must not cut the settling short either: a
concurrency slot not given back, a dead letter or the trail's export never written, or the run
ending Canceled with no record at all. Temporal's Python SDK makes this more than a narrow race:
a task that carries a reply and a cancel runs the reply to a standstill before it applies the
cancel, so the run decides on the reply and the cancel lands while it settles.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from dsmo.workflows.common import patches
from dsmo.workflows.common.cancel_shield import shielded
from dsmo.workflows.run.context import Run

T = TypeVar("T")

# workflow.patched id: the settling of a decided ending is shielded from a cancel.
SETTLE_PAST_A_CANCEL_PATCH = "settle-past-a-cancel"


async def past_a_cancel(run: Run, work: Callable[[], Awaitable[T]]) -> T:
    """Await ``work()``, part of settling the run's decided ending, to its end even if the run is
    cancelled meanwhile (runs written before this change await it as it is: a cancel reaches it).

    Args:
        run: The run.
        work: Makes the awaitable (called once, on either path).

    Returns:
        What the work returned.
    """
    if not patches.patched(SETTLE_PAST_A_CANCEL_PATCH):
        return await work()
    writes = run.state.writes
    # The work's own task starts after a status write the run has due (`StatusWrites`): held until
    # then, that write is merged with the ending's own, as when the work ran inline.
    writes.hold()

    async def begun() -> T:
        writes.release()
        return await work()

    return await shielded(begun())
