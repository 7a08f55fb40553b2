"""The starter scripts at the repository's top (`starter/`, as in Temporal's samples) work as their
docstrings say: publish a definition, start a run of it by name, deliver the event it waits for."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
GREETING = """
agent: {agent}
inputs: [name]
start: ask
nodes:
  ask:
    actionType: wait_for_response
    parameters: {{timeout: 1h}}
"""


async def _script(harness: Harness, name: str, *args: str) -> str:
    # In a thread: the test's worker runs on this event loop and must keep running meanwhile.
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(REPO / "starter" / name), *args],
        env=harness.cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


async def test_publish_start_by_name_and_deliver(harness: Harness, tmp_path: Path) -> None:
    agent = f"starter-{uuid.uuid4().hex[:8]}"
    definition = tmp_path / "greeting.yaml"
    definition.write_text(GREETING.format(agent=agent))
    assert (await _script(harness, "publish.py", str(definition))).startswith(f"published {agent} ")

    started = await _script(harness, "start_run.py", agent, json.dumps({"name": "Ana"}))
    run_id = started.split()[1].rstrip(":")
    harness.started.append(run_id)
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING}, timeout=60)

    data = json.dumps({"text": "yes"})
    answer = await _script(harness, "deliver_event.py", run_id, "MESSAGE_RECEIVED", data, "reply-1")
    assert answer.startswith("event reply-1: accepted;"), answer
    assert (await harness.dsmo.result(run_id)).status == RunStatus.COMPLETED
