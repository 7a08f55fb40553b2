"""A replay the record cannot answer is an error: `dsmo replay` says why on one line and exits 2,
and asks no model. (A replay that follows its record exits 0; one whose path differs is a report.)"""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid

import pytest

from bench.llm_server import ChatServer
from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness
from tests.integration.replay import test_replay_loops as loops
from tests.integration.replay.test_replay_loops import BIN, loop, script

pytestmark = pytest.mark.integration

# The looped support agent's model server and worker: the loop tests' own fixtures.
chat = loops.chat
loop_harness = loops.loop_harness


def replay(harness: Harness, run_id: str, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**harness.cli_env(), "DSMO_LLM_BASE_URL": ""}
    return subprocess.run(
        [str(BIN / "dsmo"), "replay", run_id, *flags], capture_output=True, text=True, env=env, timeout=180, check=False
    )


async def test_a_replay_whose_record_lost_a_visit_exits_2_naming_why(loop_harness: Harness, chat: ChatServer) -> None:
    dsmo, store = loop_harness.dsmo, loop_harness.store
    customer = "c-lost"
    script(chat, customer)
    run_id = await loop_harness.start(loop(f"lost-{uuid.uuid4().hex[:8]}", "1"), {"customer": customer})
    result = await asyncio.wait_for(dsmo.result(run_id), 120)
    assert result.status is RunStatus.COMPLETED and result.path[:3] == ["think", "tool", "think"]
    # The second visit's record is gone from the store (deleted by hand, or lost): nothing can answer it.
    second = [e for e in await dsmo.events(run_id) if e.type == "STAGE_SUCCEEDED" and e.stage == "think"][1]
    folder = second.artifact_uris[0].removeprefix(f"s3://{store.bucket}/").rsplit("/attempt=", 1)[0] + "/"
    lost = [store.key_of(uri)[1] for uri in store.list_uris(folder)]
    assert lost, folder
    store.delete_keys(lost)
    calls = len(chat.requests)

    as_json = await asyncio.to_thread(replay, loop_harness, run_id, "--json")
    assert as_json.returncode == 2, as_json.stdout + as_json.stderr
    report = json.loads(as_json.stdout)
    loop_harness.started.append(report["replay"])
    assert report["problem"] and "think" in report["problem"], report

    shown = await asyncio.to_thread(replay, loop_harness, run_id)
    assert shown.returncode == 2, shown.stdout + shown.stderr
    lines = shown.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the replay could not follow the record: "), shown.stderr
    assert "Traceback" not in shown.stderr
    assert len(chat.requests) == calls  # no model was asked to fill the gap
