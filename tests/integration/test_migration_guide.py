"""The worked example of "Changing a definition while runs are waiting" (docs/migration.md), executed:
its files written, its commands run in order against the suite's stack, and each output it shows
found in what the commands before it printed.

The agent's name and the run id are made unique (a stack the suite reuses may hold them).
"""

from __future__ import annotations

import asyncio
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import Harness

pytestmark = pytest.mark.integration

PAGE = Path(__file__).resolve().parents[2] / "docs" / "migration.md"
FENCE = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```$', re.MULTILINE | re.DOTALL)
BIN = Path(sys.executable).parent


def worked_example() -> list[tuple[str, str | None, str]]:
    text = PAGE.read_text()
    section = text.split("## A worked example", 1)[1].split("\n## ", 1)[0]
    return [(language, title or None, body) for language, title, body in FENCE.findall(section)]


def test_the_example_has_its_files_commands_and_outputs() -> None:
    blocks = worked_example()
    assert [title for _, title, _ in blocks if title] == ["onboarding-v1.yaml", "onboarding-v2.yaml"]
    assert sum(language == "text" for language, _, _ in blocks) == 4


async def test_every_step_of_the_worked_example_works(harness: Harness, tmp_path: Path) -> None:
    agent, run_id = f"hiring-{uuid.uuid4().hex[:8]}", f"ana-{uuid.uuid4().hex[:8]}"

    def unique(text: str) -> str:
        return text.replace("hiring-onboarding", agent).replace("ana-1", run_id)

    printed = ""
    for language, title, body in worked_example():
        if title:
            (tmp_path / title).write_text(unique(body))
        elif language == "bash":
            printed = ""
            for line in unique(body).splitlines():
                # In a thread: the suite's worker polls on this test's event loop meanwhile.
                done = await asyncio.to_thread(
                    subprocess.run,
                    [str(BIN / "dsmo"), *shlex.split(line)[1:]],
                    check=False,  # the return code is asserted with the output
                    cwd=tmp_path,
                    env=harness.cli_env(),
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
                printed += done.stdout + done.stderr
        elif language == "text":
            for expected in unique(body).splitlines():
                assert expected in printed, f"{expected!r} not in:\n{printed}"
    result = await harness.dsmo.result(run_id)
    assert result.variables["team"] == "platform"
    assert [m["message"] for m in harness.messages(run_id)][-1] == "Welcome to the platform team!"
