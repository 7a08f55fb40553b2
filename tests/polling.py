"""Waiting in tests for what shows up a moment later (visibility, a server's pages, a run's state).

A wait is for an observable condition and is bounded by time, not by a count of tries: the bound is
a hang guard, generous because the suite runs beside other work, and running out of it fails the
test with what it waited for (never falls through to a later, more confusing assertion).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
LAST_SHOWN = 2000  # characters of the last value read that a failure shows


async def until(
    check: Callable[[], Awaitable[bool] | bool], what: str, *, seconds: float = 60.0, pause: float = 0.2
) -> None:
    """Wait until ``check`` holds.

    Args:
        check: Called (and awaited, if it returns an awaitable) until it returns true.
        what: The condition waited for, in words: the failure names it.
        seconds: How long to keep trying; a hang guard, not a speed target.
        pause: The sleep between tries.

    Raises:
        AssertionError: When ``check`` still does not hold once ``seconds`` have passed.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        answer = check()
        if await answer if inspect.isawaitable(answer) else answer:
            return
        if loop.time() >= deadline:
            raise AssertionError(f"not within {seconds:g} s: {what}")
        await asyncio.sleep(pause)


async def until_value(
    get: Callable[[], Awaitable[T]], ok: Callable[[T], bool], what: str, *, seconds: float = 60.0, pause: float = 0.2
) -> T:
    """Wait until a value read by ``get`` satisfies ``ok``, and return that value.

    Args:
        get: Reads the value, each try afresh.
        ok: Whether a value is the one waited for.
        what: The condition waited for, in words: the failure names it (and the last value read).
        seconds: How long to keep trying; a hang guard, not a speed target.
        pause: The sleep between tries.

    Returns:
        The first value read that satisfies ``ok``.

    Raises:
        AssertionError: When no value read within ``seconds`` satisfies ``ok``.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        value = await get()
        if ok(value):
            return value
        if loop.time() >= deadline:
            last = repr(value)
            raise AssertionError(f"not within {seconds:g} s: {what} (last read: {last[:LAST_SHOWN]})")
        await asyncio.sleep(pause)
