"""The HTTP ingress served on a free loopback port from a thread, for tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from dsmo.config.settings import Settings
from dsmo.server.ingress.app import create_app
from dsmo.server.ingress.serving import server_config
from tests.stack import free_port_block


@contextmanager
def serving(settings: Settings) -> Iterator[str]:
    """Yield the base URL of a real uvicorn server running the ingress for ``settings``."""
    port = free_port_block(1)
    server = uvicorn.Server(server_config(create_app(settings), settings, "127.0.0.1", port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "ingress did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
