"""Sending a run back from the CLI (`dsmo runs rewind`): the run's answer in one line or as JSON,
and refusals in one line writing nothing."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Harness
from tests.migration_versions import history_length
from tests.rewind_flow import waiting_at, waiting_for_signature

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent


async def dsmo_cli(harness: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    # In a thread: the test's worker runs on this loop and must go on serving the run meanwhile.
    return await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), *args],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=120,
        check=False,
    )


async def rewound_data(harness: Harness, run_id: str) -> list[dict[str, Any]]:
    return [event.data for event in await harness.dsmo.events(run_id) if event.type == "RUN_REWOUND"]


async def test_dsmo_runs_rewind_says_what_it_did_in_one_line_and_refuses_writing_nothing(harness: Harness) -> None:
    run_id = await waiting_for_signature(harness)
    history = await history_length(harness.dsmo, run_id)

    unknown = await dsmo_cli(harness, "runs", "rewind", run_id, "--to", "nowhere", "--reason", "typo")
    unread = await dsmo_cli(harness, "runs", "rewind", run_id, "--to", "docs", "--set", "colour=1", "--reason", "x")
    for refused in (unknown, unread):
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert refused.stdout == "" and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "Traceback" not in refused.stderr
    assert unknown.stderr.startswith("error: --to: 'nowhere' is not a node of"), unknown.stderr
    assert unread.stderr.startswith(f"error: run '{run_id}': set: "), unread.stderr
    assert "colour" in unread.stderr
    assert await history_length(harness.dsmo, run_id) == history  # nothing written to the run

    done = await dsmo_cli(
        harness, "runs", "rewind", run_id, "--to", "docs", "--set", "applicant=ana@right.example",
        "--reason", "wrong address", "--by", "ops",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"run {run_id} goes back from sign to docs; undone: order"
    await waiting_at(harness, run_id, "docs")
    assert (await harness.dsmo.variables(run_id))["applicant"] == "ana@right.example"
    [data] = await rewound_data(harness, run_id)
    assert (data["fromNode"], data["toNode"], data["compensate"], data["sagaSteps"]) == (
        "sign",
        "docs",
        True,
        ["order"],
    )
    assert (data["requestedBy"], data["reason"], data["set"]) == (
        "ops",
        "wrong address",
        {"applicant": "ana@right.example"},
    )


async def test_dsmo_runs_rewind_no_compensate_json_prints_the_answer_with_the_steps_left_done(
    harness: Harness,
) -> None:
    run_id = await waiting_for_signature(harness)
    done = await dsmo_cli(
        harness, "runs", "rewind", run_id, "--to", "docs", "--reason", "re-check", "--no-compensate", "--json"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "runId": run_id,
        "fromNode": "sign",
        "toNode": "docs",
        "compensated": [],
        "compensationFailed": [],
        "left": ["order"],
    }
    await waiting_at(harness, run_id, "docs")
    [data] = await rewound_data(harness, run_id)
    assert (data["compensate"], data["requestedBy"]) == (False, "user")
