"""What every `dsmo` command module shares: the click context object, running a coroutine, and
leaving the process. Lower than the command modules, so they import it and not each other."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click

from starter.client import DsmoClient
from starter.settings import Settings
from starter.telemetry import flush_tracing, setup_tracing

T = TypeVar("T")


class Context:
    """The `dsmo` group's shared state: the --debug flag and settings read on first use."""

    def __init__(self, debug: bool) -> None:
        self.debug = debug
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = Settings.from_env()
        return self._settings

    async def client(self) -> DsmoClient:
        # Before the client connects: with an `OTEL_*` exporter, starts and events are traced (an
        # event joins the run's trace). Here rather than at start-up, so `dsmo worker` and
        # `dsmo serve` keep installing theirs under their own service names.
        setup_tracing("dsmo-cli")
        return await DsmoClient.connect(self.settings)


pass_context = click.make_pass_decorator(Context)


def run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``coro_fn()`` to completion on a fresh event loop."""
    return asyncio.run(_call(coro_fn))


async def _call(coro_fn: Callable[[], Awaitable[T]]) -> T:
    return await coro_fn()


def hard_exit(code: int) -> None:
    """Exit without interpreter teardown.

    The Temporal client's native threads can abort a finishing interpreter ("PyGILState_Release
    ... finalizing", temporalio/sdk-python#300), turning a successful command into exit code -6.
    """
    flush_tracing()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
