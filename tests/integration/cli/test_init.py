"""`dsmo init` end to end, from a virtualenv holding DSMO's wheel: scaffold a project, its unit
tests pass, an installed project's worker loads it by entry point, and its definition runs."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from dsmo import Settings
from tests.fresh_venv import FreshVenv

pytestmark = pytest.mark.integration


def test_a_scaffolded_project_tests_loads_and_runs(fresh_venv: FreshVenv, stack_settings: Settings, tmp_path: Path):
    made = fresh_venv.run("dsmo", "init", "ticket-desk", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    project = tmp_path / "ticket-desk"
    assert "agent ticket-desk-triage" in made.stdout

    # Its own unit tests, run as its README says.
    tested = fresh_venv.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "3 passed" in tested.stdout

    # Installed, the project's entry point makes a plain `dsmo worker` (started elsewhere) load it.
    fresh_venv.pip_install("-e", str(project), cwd=tmp_path)
    settings = stack_settings.with_changes(
        temporal={"task_queue": f"init-{uuid.uuid4().hex[:8]}"}, worker={"metrics_bind": ""}
    )
    env = {**settings.to_env(), "DSMO_OUTBOX_DIR": str(tmp_path / "outbox")}
    with fresh_venv.worker(settings, cwd=tmp_path, env=env, log=tmp_path / "worker.log"):
        listed = fresh_venv.run("dsmo", "agents", "list", "--json", cwd=tmp_path, env=env)
        assert listed.returncode == 0, listed.stderr
        agent = next(row for row in json.loads(listed.stdout)["agents"] if row["name"] == "ticket-desk-triage")
        assert agent["inputSchema"]["required"] == ["subject"]

        ticket = json.dumps({"subject": "Checkout is down", "body": "Payments are broken"})
        started = fresh_venv.run(
            "dsmo", "start", "definitions/ticket-desk.yaml", "--wait", "--json", "--input", ticket, cwd=project, env=env
        )
        assert started.returncode == 0, started.stdout + started.stderr
        run = json.loads(started.stdout)
        assert run["status"] == "completed" and run["path"] == ["triage", "page"]
        (message,) = (tmp_path / "outbox" / run["runId"]).glob("*.json")
        sent = json.loads(message.read_text())
        assert sent["to"] == "on-call" and sent["message"] == "Urgent ticket: Checkout is down"
