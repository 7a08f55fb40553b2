"""The worked examples of the user guides, executed: each page's files written, its commands run in
order against the suite's stack, and each output it shows found in what the commands before it
printed.

- docs/migration.md, "Changing a definition while runs are waiting";
- docs/fixing-runs.md, "Fixing a run";
- docs/what-if.md, "Testing a new version against real runs".

Names a page uses (agents, run ids) are made unique: a stack the suite reuses may hold them.
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

from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness
from tests.polling import until_value

pytestmark = pytest.mark.integration

DOCS = Path(__file__).resolve().parents[3] / "docs"
FENCE = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```$', re.MULTILINE | re.DOTALL)
BIN = Path(sys.executable).parent


def worked_example(page: str, heading: str = "A worked example") -> list[tuple[str, str | None, str]]:
    text = (DOCS / page).read_text()
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [(language, title or None, body) for language, title, body in FENCE.findall(section)]


async def run_example(
    harness: Harness,
    tmp_path: Path,
    page: str,
    names: dict[str, str],
    exits: dict[str, int] | None = None,
    heading: str = "A worked example",
) -> None:
    """Write the page's files, run its commands, find each output it shows; ``names`` renamed.

    A command exits 0 unless ``exits`` gives the status of commands starting with a prefix.
    """

    def unique(text: str) -> str:
        for name, replacement in names.items():
            text = text.replace(name, replacement)
        return text

    printed = ""
    for language, title, body in worked_example(page, heading):
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
                expected_exit = next((code for prefix, code in (exits or {}).items() if line.startswith(prefix)), 0)
                assert done.returncode == expected_exit, f"{line}\n{done.stdout}\n{done.stderr}"
                printed += done.stdout + done.stderr
        elif language == "text":
            for expected in unique(body).splitlines():
                assert expected in printed, f"{expected!r} not in:\n{printed}"


def test_the_examples_have_their_files_commands_and_outputs() -> None:
    migration = worked_example("migration.md")
    assert [title for _, title, _ in migration if title] == ["onboarding-v1.yaml", "onboarding-v2.yaml"]
    assert sum(language == "text" for language, _, _ in migration) == 4
    what_if = worked_example("what-if.md")
    assert [title for _, title, _ in what_if if title] == ["campaign-v1.yaml", "campaign-v2.yaml"]
    fixing = worked_example("fixing-runs.md")
    assert [title for _, title, _ in fixing if title] == ["screening.yaml"]
    assert sum(language == "text" for language, _, _ in fixing) == 1
    going_back = worked_example("fixing-runs.md", "A worked example of going back")
    assert [title for _, title, _ in going_back if title] == ["contract.yaml"]


async def test_every_step_of_the_migration_example_works(harness: Harness, tmp_path: Path) -> None:
    run_id = f"ana-{uuid.uuid4().hex[:8]}"
    await run_example(
        harness, tmp_path, "migration.md", {"hiring-onboarding": f"hiring-{uuid.uuid4().hex[:8]}", "ana-1": run_id}
    )
    result = await harness.dsmo.result(run_id)
    assert result.variables["team"] == "platform"
    assert [m["message"] for m in harness.messages(run_id)][-1] == "Welcome to the platform team!"


async def test_every_step_of_the_fork_example_works(harness: Harness, tmp_path: Path) -> None:
    run_id = f"ana-{uuid.uuid4().hex[:8]}"
    await run_example(
        harness, tmp_path, "fixing-runs.md", {"screening-fix": f"fix-{uuid.uuid4().hex[:8]}", "ana-2": run_id}
    )
    fork = f"{run_id}-fixed"
    result = await harness.dsmo.result(fork)
    assert result.variables["lastResponse"] == "Sí, sigo interesada"
    # The question went out once, from the original; the fork only thanked Ana.
    assert [m["message"] for m in harness.messages(fork)] == ["Gracias, recibimos: Sí, sigo interesada"]
    assert len(harness.messages(run_id)) == 2


async def test_every_step_of_the_rewind_example_works(harness: Harness, tmp_path: Path) -> None:
    run_id = f"ana-{uuid.uuid4().hex[:8]}"
    names = {"contract-fix": f"contract-{uuid.uuid4().hex[:8]}", "ana-3": run_id}
    await run_example(harness, tmp_path, "fixing-runs.md", names, heading="A worked example of going back")
    result = await harness.dsmo.result(run_id)
    assert result.variables["email"] == "ana@example.com"
    assert result.variables["documentUrls"] == ["s3://uploads/ana-id.pdf"]
    # The ID card was asked for twice (the second time of the corrected address), the signature once.
    sent = [(m["to"], m.get("kind")) for m in harness.messages(run_id)]
    assert [to for to, _ in sent] == [
        "ana@exmaple.com",
        "ana@exmaple.com",
        "ana@example.com",
        "ana@example.com",
        "ana@example.com",
    ]


async def test_every_step_of_the_flow_control_example_works(harness: Harness, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    names = {"chat-desk": f"chat-{tag}", "ana-chat": f"ana-{tag}", "luis-chat": f"luis-{tag}", '"ana"': f'"ana-{tag}"'}
    names["conversation.id=ana"] = f"conversation.id=ana-{tag}"
    await run_example(harness, tmp_path, "flow-control.md", names)
    dsmo = harness.dsmo
    assert (await dsmo.result(f"ana-{tag}-1")).status is RunStatus.COMPLETED
    # The second message's run got the slot the first gave back, and answered.
    await until_value(
        lambda: dsmo.status(f"ana-{tag}-2"), lambda view: view.status is RunStatus.WAITING, "the second run waits"
    )
    assert harness.messages(f"ana-{tag}-2")[0]["message"] == "Recibido: ¿Hay alguien?"
    for run_id in (f"ana-{tag}-2", f"luis-{tag}-1"):
        await dsmo.cancel(run_id, reason="example done")


async def test_every_step_of_the_what_if_example_works(harness: Harness, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    names = {"campaign-what-if": f"campaign-{tag}", **{f"{who}-3": f"{who}-{tag}" for who in ("ana", "luis", "eva")}}
    await run_example(harness, tmp_path, "what-if.md", names, exits={"dsmo replay --query": 1})
    # The replays reached nobody: each original run sent its two messages, no more.
    assert [len(harness.messages(f"{who}-{tag}")) for who in ("ana", "luis", "eva")] == [2, 2, 2]
