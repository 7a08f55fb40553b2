"""`dsmo` is the only import name DSMO installs: a user project with its own top-level `workflows/`
and `activities/` packages runs its agent in a real run, from a virtualenv holding DSMO's wheel."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsmo import Settings
from dsmo.activities.artifacts import ArtifactStore
from tests.fresh_venv import FreshVenv

pytestmark = pytest.mark.integration

PROJECT = Path(__file__).resolve().parents[2] / "coexist_project"


@pytest.fixture
def project_worker(fresh_venv: FreshVenv, stack_settings: Settings, tmp_path: Path) -> Iterator[dict[str, str]]:
    """`dsmo worker --load activities.review`, run from the project's folder with the wheel's `dsmo`."""
    settings = stack_settings.with_changes(
        temporal={"task_queue": f"coexist-{uuid.uuid4().hex[:8]}"}, worker={"metrics_bind": ""}
    )
    env = {**settings.to_env(), "DSMO_OUTBOX_DIR": str(tmp_path / "outbox")}
    with fresh_venv.worker(settings, "--load", "activities.review", cwd=PROJECT, env=env, log=tmp_path / "worker.log"):
        yield env


def test_a_project_with_its_own_workflows_and_activities_runs_beside_the_wheel(
    fresh_venv: FreshVenv, project_worker: dict[str, str], store: ArtifactStore, tmp_path: Path
) -> None:
    queue = project_worker["DSMO_TASK_QUEUE"]
    done = fresh_venv.run("python", "start.py", "The lamp is broken and slow", queue, cwd=PROJECT, env=project_worker)
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    assert run["status"] == "completed" and run["path"] == ["tone", "escalate"]
    # Each import name resolved to its owner: DSMO to the wheel, the others to the project.
    assert Path(run["modules"]["dsmo"]).is_relative_to(fresh_venv.site_packages)
    assert Path(run["modules"]["workflows"]) == PROJECT / "workflows" / "__init__.py"
    assert Path(run["modules"]["activities"]) == PROJECT / "activities" / "__init__.py"
    (message,) = (tmp_path / "outbox" / run["runId"]).glob("*.json")
    assert json.loads(message.read_text())["message"] == "A customer is unhappy: The lamp is broken and slow"
    # The agent that ran was the project's, imported in the worker as `activities.review`.
    audit = fresh_venv.run("dsmo", "events", run["runId"], "--json", cwd=tmp_path, env=project_worker)
    assert audit.returncode == 0, audit.stderr
    stage = next(e for e in map(json.loads, audit.stdout.splitlines()) if e["type"] == "STAGE_SUCCEEDED")
    assert stage["data"]["summary"] == {"tone": "negative"}
    output = store.read_json(stage["artifactUris"][-1])["output"]
    assert output == {"praise": 0, "complaints": 2, "module": "activities.review"}
