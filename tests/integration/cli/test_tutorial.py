"""The "Write your first agent" tutorial, executed: every command and file of docs/tutorial.md, in
order, in a fresh virtualenv holding DSMO's wheel, against the suite's stack.

Two liberties, both about the machine rather than the page: `pip install` runs offline with the
suite's dependencies (see tests/fresh_venv.py), and the run id is made unique, since a stack the
suite reuses may already hold a `ticket-1`. `dsmo dev up` finds the suite's Temporal and S3
answering and starts only the worker; `dsmo dev down` stops only that worker.
"""

from __future__ import annotations

import re
import shlex
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from dsmo import Settings
from tests.fresh_venv import FreshVenv

pytestmark = pytest.mark.integration

TUTORIAL = Path(__file__).resolve().parents[3] / "docs" / "tutorial.md"
FENCE = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```$', re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    language: str
    title: str | None
    body: str


def blocks() -> list[Block]:
    return [Block(language, title or None, body) for language, title, body in FENCE.findall(TUTORIAL.read_text())]


def test_the_tutorial_parses_into_steps() -> None:
    found = blocks()
    assert [block.title for block in found if block.title] == [
        "ticket_desk/agents.py (add at the end)",
        "tests/test_agents.py (add at the end)",
        "definitions/support.yaml",
    ]
    commands = [line for block in found if block.language == "bash" for line in block.body.splitlines()]
    assert commands[0] == "dsmo init ticket-desk" and commands[-1] == "dsmo dev down"


def test_every_step_of_the_tutorial_works(fresh_venv: FreshVenv, stack_settings: Settings, tmp_path: Path) -> None:
    settings = stack_settings.with_changes(
        temporal={"task_queue": f"tutorial-{uuid.uuid4().hex[:8]}"}, worker={"metrics_bind": ""}
    )
    env = {**settings.to_env(), "DSMO_STATE_DIR": str(tmp_path / "state")}
    run_id = f"ticket-{uuid.uuid4().hex[:10]}"
    cwd = tmp_path / "work"
    cwd.mkdir()
    outputs: dict[str, str] = {}
    try:
        for block in blocks():
            if block.title:
                path = cwd / block.title.split(" (")[0]
                if block.title.endswith("(add at the end)"):
                    path.write_text(path.read_text() + "\n\n" + block.body)
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(block.body)
            elif block.language == "bash":
                for line in filter(None, block.body.splitlines()):
                    argv = [arg.replace("ticket-1", run_id) for arg in shlex.split(line, comments=True)]
                    if argv[0] == "cd":
                        cwd = cwd / argv[1]
                    elif argv[:2] == ["pip", "install"]:
                        fresh_venv.pip_install(*(arg.replace("[dev]", "") for arg in argv[2:]), cwd=cwd)
                    else:
                        done = fresh_venv.run(*argv, cwd=cwd, env=env, timeout=180)
                        assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
                        outputs[argv[0] if argv[0] != "dsmo" else " ".join(argv[:2])] = done.stdout
    finally:
        fresh_venv.run("dsmo", "dev", "down", cwd=cwd, env=env)
    # What the page says the reader sees.
    assert "5 passed" in outputs["python"]
    assert "completed path triage -> page -> reply -> answer" in outputs["dsmo start"]
    assert "same state path" in outputs["dsmo replay"] and "output reply: same" in outputs["dsmo replay"]
    assert "STAGE_SUCCEEDED" in outputs["dsmo events"]
    messages = sorted((tmp_path / "state" / "outbox" / run_id).glob("*.json"))
    assert len(messages) == 2
