"""The stack a study measures on: the running one if it answers (`make up`), else a private one."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from dsmo.config.settings import Settings
from dsmo.devstack.stack import DevStack, private_settings, reusable

# What a study is handed: opens the stack and yields its settings, and the DevStack when it was
# started for the study (None when it was already running).
Stack = Callable[[], AbstractAsyncContextManager[tuple[Settings, DevStack | None]]]


@contextlib.asynccontextmanager
async def bench_stack() -> AsyncIterator[tuple[Settings, DevStack | None]]:
    """The running stack if one answers (`make up`), else a private one started and stopped here."""
    settings = Settings.from_env().with_changes(worker={"metrics_bind": ""})
    if await reusable(settings):
        yield settings, None
        return
    settings = private_settings(Path(tempfile.mkdtemp(prefix="dsmo-bench-")), settings)
    stack = DevStack(settings)
    await stack.up(timeout=90)
    try:
        yield settings, stack
    finally:
        stack.down()
