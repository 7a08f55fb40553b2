"""DSMO's examples are out of the core: a production worker offers them only when asked.

`dsmo worker` with no ``DSMO_LOAD`` offers DSMO's own plugins (the channels) and no example agent
or order action, although the examples are installed beside it; with ``DSMO_LOAD=dsmo_examples``
it offers them all. The embedded stack's worker loads them by their ``dsmo.dev_plugins`` entry
point (test_stack runs the screening example on it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from dsmo.config.settings import Settings
from dsmo.devstack.stack import dev_plugins_env
from dsmo_examples.orders.order_steps import STEPS
from tests.fresh_venv import polling_worker

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
EXAMPLE_AGENTS = {
    "candidate-profile",
    "text-extract",
    "rule-classify",
    "invoice-enrich",
    "record-validate",
    "llm-summarize",
}
ORDER_ACTIONS = {step.name for step in STEPS}


def production_worker(settings: Settings, env: dict[str, str], log: Path) -> AbstractContextManager[None]:
    """`dsmo worker` as a deployment runs it: no `--load`, plugins from entry points and ``env``."""
    return polling_worker([str(BIN / "dsmo"), "worker"], settings, env=env, log=log)


def offer_of(settings: Settings, load: str | None, tmp_path: Path) -> dict[str, Any]:
    """What a production worker with ``DSMO_LOAD=load`` (unset when None) offers, as `dsmo agents list --json`."""
    env = {key: value for key, value in os.environ.items() if key != "DSMO_LOAD"}
    env.update({key: value for key, value in settings.to_env().items() if key != "DSMO_LOAD"})
    if load is not None:
        env["DSMO_LOAD"] = load
    with production_worker(settings, env, tmp_path / f"worker-{load or 'none'}.log"):
        listed = subprocess.run(
            [str(BIN / "dsmo"), "agents", "list", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert listed.returncode == 0, listed.stderr
    assert "showing the plugins loaded here" not in listed.stderr  # the worker's own catalog, not this process's
    offer: dict[str, Any] = json.loads(listed.stdout)
    return offer


def names(offer: dict[str, Any], kind: str) -> set[str]:
    return {row["name"] for row in offer[kind]}


def test_a_production_worker_offers_no_example_unless_asked(stack_settings: Settings, tmp_path: Path) -> None:
    settings = stack_settings.with_changes(
        temporal={"task_queue": f"prod-{uuid.uuid4().hex[:8]}"},
        worker={"metrics_bind": ""},
        messaging={"outbox_dir_override": str(tmp_path / "outbox")},
    )
    bare = offer_of(settings, None, tmp_path)
    assert not names(bare, "agents") & EXAMPLE_AGENTS, names(bare, "agents")
    assert not names(bare, "actions") & ORDER_ACTIONS, names(bare, "actions")
    assert "file" in names(bare, "channels")  # DSMO's own entry point: what every deployment needs


def test_dsmo_load_offers_the_examples(stack_settings: Settings, tmp_path: Path) -> None:
    settings = stack_settings.with_changes(
        temporal={"task_queue": f"prod-{uuid.uuid4().hex[:8]}"},
        worker={"metrics_bind": ""},
        messaging={"outbox_dir_override": str(tmp_path / "outbox")},
    )
    asked = offer_of(settings, "dsmo_examples", tmp_path)
    assert names(asked, "agents") >= EXAMPLE_AGENTS
    assert names(asked, "actions") >= ORDER_ACTIONS
    compensatable = {row["name"]: row["compensatable"] for row in asked["actions"]}
    assert all(compensatable[name] for name in ORDER_ACTIONS)


def test_the_embedded_stacks_worker_loads_the_examples_after_the_configured_plugins() -> None:
    assert dev_plugins_env(Settings().with_changes(worker={"load": "acme.plugin"})) == {
        "DSMO_LOAD": "acme.plugin,dsmo_examples"
    }
    assert dev_plugins_env(Settings()) == {"DSMO_LOAD": "dsmo_examples"}
    assert dev_plugins_env(Settings().with_changes(worker={"load": "dsmo_examples"})) == {
        "DSMO_LOAD": "dsmo_examples"
    }  # once
