"""Calling user code that may be a plain function or an ``async def`` from an async activity."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any


def is_async_callable(fn: Any) -> bool:
    """True for an ``async def``, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


async def call_maybe_async(executor: Executor, fn: Callable[..., Any], *args: Any) -> Any:
    """Await ``fn(*args)`` on the event loop if it is async; else run it on ``executor``.

    A plain function runs with the activity's context (``activity.info()``, heartbeats) carried
    into the thread; if it returns an awaitable, that is awaited on the loop.
    """
    if is_async_callable(fn):
        return await fn(*args)
    context = contextvars.copy_context()
    result = await asyncio.get_running_loop().run_in_executor(executor, functools.partial(context.run, fn, *args))
    if inspect.isawaitable(result):
        return await result
    return result
