"""The embedded stack for the test session: reuse a healthy one, else start a private one."""

from __future__ import annotations

import socket
from pathlib import Path

from dsmo.config.settings import Settings
from dsmo.devstack.stack import DevStack, free_port_block, private_settings, reusable

__all__ = ["free_port_block", "port_free", "private_settings", "reusable", "start_private"]


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


async def start_private(state_dir: Path) -> tuple[Settings, DevStack]:
    settings = private_settings(state_dir)
    stack = DevStack(settings)
    await stack.up(timeout=90)
    return settings, stack
