"""What every `dsmo` command module shares: the click context object and running a coroutine.
Lower than the command modules, so they import it and not each other."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.runtime.telemetry import setup_tracing
from dsmo.workflows.common.errors import DsmoError

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

    async def client(self, *, lazy: bool = False) -> DsmoClient:
        # Before the client connects: with an `OTEL_*` exporter, starts and events are traced (an
        # event joins the run's trace). Here rather than at start-up, so `dsmo worker` and
        # `dsmo serve` keep installing theirs under their own service names.
        setup_tracing("dsmo-cli")
        return await DsmoClient.connect(self.settings, lazy=lazy)


pass_context = click.make_pass_decorator(Context)


def run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``coro_fn()`` to completion on a fresh event loop."""
    return asyncio.run(_call(coro_fn))


async def _call(coro_fn: Callable[[], Awaitable[T]]) -> T:
    return await coro_fn()


def json_object(text: str, option: str) -> dict[str, Any]:
    """``text``, a JSON object given to ``option``; else DsmoError naming the option and why.

    Raises:
        DsmoError: Not JSON, or JSON but not an object.
    """
    try:
        value = json.loads(text)
    except ValueError as err:
        raise DsmoError(f"{option}: not valid JSON ({err})") from None
    if not isinstance(value, dict):
        raise DsmoError(f"{option}: must be a JSON object, not {type(value).__name__}")
    return value
