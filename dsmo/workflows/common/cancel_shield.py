"""Workflow work that runs to its end even if the run is cancelled while it is under way.

Temporal cancels a run by cancelling what its code awaits at that moment. Work that must not be
cut short by that (a saga's unwinding, an action's output being recorded, a run settling the
ending it has decided) runs as its own task behind `asyncio.shield`: the cancel lands on the
shield, and the work goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def through_cancel(work: Awaitable[T]) -> tuple[T, bool]:
    """Await ``work`` to the end, and say whether a cancel landed meanwhile.

    Args:
        work: What must finish.

    Returns:
        What ``work`` returned, and whether the run was asked to cancel while it ran (the caller
        records what it finished, then lets the cancel through, or not).
    """
    finished, cancelled = await settled(work)
    return finished.result(), cancelled


async def shielded(work: Awaitable[T]) -> T:
    """Await ``work`` to the end even if the run is cancelled meanwhile (`through_cancel`)."""
    return (await through_cancel(work))[0]


async def settled(work: Awaitable[T]) -> tuple[asyncio.Future[T], bool]:
    """Await ``work`` to its end, whether it returns or raises, even if the run is cancelled.

    Args:
        work: What must end before the run may act on a cancel (a saga step under way, whose
            effect may land: the unwinding must know whether to undo it).

    Returns:
        The finished task (its ``result()`` returns or raises what ``work`` did), and whether a
        cancel landed meanwhile.
    """
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True  # the run's cancel, landing on the shield (nothing cancels the task)
        except Exception:  # noqa: BLE001 - the work's own failure: the caller reads it from the task
            break
    return task, cancelled
