"""A refused visibility filter, from the real server, is reported at its place in the user's own query.

DSMO puts its own clauses before the user's filter, and Temporal counts a syntax error's position in
the SQL it builds around the whole text. Every query-taking command answers with one line that
counts the position in what the user typed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Harness

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
QUERY = "AgentName='x' ANDD 1"
PLACED = "syntax error at character 15 of the query near 'ANDD'"


async def cli(harness: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [str(BIN / "dsmo"), *args], capture_output=True, text=True, env=harness.cli_env(), timeout=60
    )


@pytest.mark.parametrize(
    "command",
    [
        ["runs", "list", "--query", QUERY],
        ["runs", "list", "--status", "failed", "--agent", "screening", "--query", QUERY],
        ["runs", "bulk", "cancel", "--query", QUERY, "--reason", "test", "--dry-run"],
        ["runs", "bulk", "redrive", "--query", QUERY, "--dry-run"],
        ["cancel", "--query", QUERY, "--reason", "test"],
    ],
    ids=["list", "list-filtered", "bulk-cancel", "bulk-redrive", "cancel"],
)
async def test_a_syntax_error_is_placed_in_the_users_own_query(harness: Harness, command: list[str]) -> None:
    done = await cli(harness, *command)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and PLACED in lines[0] and QUERY in lines[0], lines[0]
    assert "position" not in lines[0]
