"""The embedded stack for the test session: reuse a healthy one, else start a private one."""

from __future__ import annotations

import asyncio
import random
import socket
from pathlib import Path

from starter.devstack import DevStack
from starter.settings import Settings
from starter.stack_checks import ensure_bucket, ensure_search_attributes, temporal_reachable


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As servers bind: connections lingering in TIME_WAIT do not make a port busy.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_block(size: int, *, low: int = 20000, high: int = 32000) -> int:
    """The first port of ``size`` consecutive free ports, below Linux's ephemeral range."""
    for _ in range(200):
        base = random.randrange(low, high - size)
        if all(port_free(base + offset) for offset in range(size)):
            return base
    raise RuntimeError("no block of free ports found")


async def reusable(settings: Settings) -> bool:
    """True if a stack already answers at ``settings`` (e.g. `make up`): tests then share it."""
    if not await temporal_reachable(settings.temporal_address, settings.temporal_namespace, timeout=1.0):
        return False
    try:
        await asyncio.to_thread(ensure_bucket, settings)
        await ensure_search_attributes(settings.temporal_address, settings.temporal_namespace)
    except Exception:  # noqa: BLE001 - anything wrong with it: start our own instead
        return False
    return True


def private_settings(state_dir: Path) -> Settings:
    base = free_port_block(10)
    return Settings(
        temporal_address=f"127.0.0.1:{base}",
        ui_port=base + 1,
        s3_endpoint=f"http://127.0.0.1:{base + 2}",
        seaweed_port_base=base + 3,  # uses base+3 .. base+9
        state_dir=state_dir,
    )


async def start_private(state_dir: Path) -> tuple[Settings, DevStack]:
    settings = private_settings(state_dir)
    stack = DevStack(settings)
    await stack.up(timeout=90)
    return settings, stack
