"""Calling user code that may be a plain function or an ``async def`` from an async activity."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any

from dsmo.activities.loop_watch import LoopWatch

# The worker's one loop, so one watch: its monitor reports what user code held the loop.
loop_watch = LoopWatch()


def is_async_callable(fn: Any) -> bool:
    """True for an ``async def``, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


async def call_maybe_async(
    executor: Executor,
    fn: Callable[..., Any],
    *args: Any,
    who: tuple[str, str, str] | None = None,
    blocking: bool = False,
) -> Any:
    """Await ``fn(*args)`` on the event loop if it is async; else run it on ``executor``.

    A plain function runs with the activity's context (``activity.info()``, heartbeats) carried
    into the thread; if it returns an awaitable, that is awaited on the loop.

    Args:
        executor: The threads plain functions (and ``blocking`` async ones) run on.
        fn: The user's function.
        *args: Its arguments.
        who: ``(kind, name, where)`` naming it if it blocks the loop (see `loop_watch`).
        blocking: An async ``fn`` declared blocking: it runs on its own event loop in one of
            the ``executor``'s threads, so it cannot stall the worker's loop.
    """
    loop = asyncio.get_running_loop()
    if is_async_callable(fn):
        if blocking:
            context = contextvars.copy_context()
            return await loop.run_in_executor(executor, functools.partial(context.run, _run_to_end, fn, *args))
        return await _watched(fn(*args), who)
    context = contextvars.copy_context()
    result = await loop.run_in_executor(executor, functools.partial(context.run, fn, *args))
    if inspect.isawaitable(result):
        return await _watched(result, who)
    return result


async def _watched(awaitable: Awaitable[Any], who: tuple[str, str, str] | None) -> Any:
    if who is None:
        return await awaitable
    kind, name, where = who
    return await loop_watch.run(awaitable, kind=kind, name=name, where=where)


def _run_to_end(fn: Callable[..., Any], *args: Any) -> Any:
    return asyncio.run(fn(*args))
