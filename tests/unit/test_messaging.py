"""The worker's log says who got a message, not what it said, unless told to."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dsmo.activities.messaging import FileChannel
from dsmo.workflows.contracts.activity_io import SendMessageRequest

SECRET = "Mi número de cuenta es 1234"


def message(key: str) -> SendMessageRequest:
    return SendMessageRequest(run_id="r1", node="ask", message=SECRET, to="ana", idempotency_key=key)


def test_the_log_carries_metadata_by_default_and_text_only_when_asked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dsmo.messaging")
    FileChannel(tmp_path).send(message("k1"))
    assert SECRET not in caplog.text
    assert f"message to ana from r1 (ask): {len(SECRET)} characters" in caplog.text
    caplog.clear()
    FileChannel(tmp_path, log_content=True).send(message("k2"))
    assert SECRET in caplog.text
