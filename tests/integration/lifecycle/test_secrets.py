"""Credentials never reach the logs or the CLI output, even at DEBUG."""

from __future__ import annotations

import asyncio
import base64
import logging
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dsmo.activities.messaging import FileChannel
from dsmo.client.dsmo_client import DsmoClient
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness, definition_from

pytestmark = pytest.mark.integration
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "candidate_screening.yaml"
BIN = Path(sys.executable).parent


async def test_no_secret_in_logs_or_output(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    codec_key = base64.b64encode(b"s" * 32).decode()
    settings = harness.settings.with_changes(codec={"keys": f"k1:{codec_key}"})
    secrets = [settings.store.secret_key, codec_key]
    caplog.set_level(logging.DEBUG)
    dsmo = await DsmoClient.connect(settings)
    queue = f"secret-{uuid.uuid4().hex[:8]}"
    store = harness.store
    async with build_worker(dsmo.temporal, task_queue=queue, store=store, channel=FileChannel(harness.outbox)):
        run_id = (
            await dsmo.start(definition_from(EXAMPLE), {"candidate": {"name": "S", "phone": "1"}}, task_queue=queue)
        ).run_id
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        await dsmo.respond(run_id, "ok")
        await dsmo.result(run_id)
    env = {**harness.cli_env(), **settings.to_env()}
    outputs = [
        await asyncio.to_thread(subprocess.run, [str(BIN / "dsmo"), *args], capture_output=True, text=True, env=env)
        for args in (["dev", "status"], ["status", run_id], ["--debug", "status", "no-such-run"], ["keys", "list"])
    ]
    text = caplog.text + "".join(p.stdout + p.stderr for p in outputs)
    assert len(text) > 1000  # there was plenty logged
    for secret in secrets:
        assert secret not in text
