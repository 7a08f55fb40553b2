"""What the `llm` tests share: a local chat-completions server, scripted by each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.llm_server import ChatServer


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    """A running chat server with no script: each test queues the replies it needs."""
    server = ChatServer()
    server.start()
    yield server
    server.stop()
