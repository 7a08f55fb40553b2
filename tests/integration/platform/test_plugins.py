"""Users' own agents, actions and channels, written outside DSMO's source, in a real worker process.

The plugin project is `tests/plugin_project` (its own package, its own definition); the worker
is `dsmo worker --load acme_agents.plugin`, started from that folder as a user would.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from dsmo import DsmoClient, RunStatus, Settings, parse_definition_text
from dsmo.activities.artifacts import ArtifactStore
from dsmo.runtime.provisioning import worker_polling

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
PROJECT = Path(__file__).resolve().parents[2] / "plugin_project"


@dataclass
class PluginWorker:
    settings: Settings
    env: dict[str, str]
    ledger: Path
    memos: Path

    def cli(self, *args: str, cwd: Path = PROJECT) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "dsmo"), *args], capture_output=True, text=True, env=self.env, cwd=cwd, timeout=60, check=False
        )

    def ledger_lines(self) -> list[str]:
        return self.ledger.read_text().splitlines() if self.ledger.exists() else []


@pytest_asyncio.fixture
async def plugin_worker(stack_settings: Settings, tmp_path: Path) -> AsyncIterator[PluginWorker]:
    settings = stack_settings.with_changes(
        temporal={"task_queue": f"plugins-{uuid.uuid4().hex[:8]}"}, worker={"metrics_bind": ""}
    )
    env = {
        **os.environ,
        **settings.to_env(),
        "ACME_LEDGER": str(tmp_path / "ledger.txt"),
        "ACME_MEMOS": str(tmp_path / "memos"),
        "DSMO_LOAD": "dsmo_examples",  # beside the project's plugin: DSMO's examples, loaded when asked
    }
    process = subprocess.Popen(
        [str(BIN / "dsmo"), "worker", "--load", "acme_agents.plugin"],
        cwd=PROJECT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "worker.log", "w"),  # noqa: SIM115 - the child owns it
    )
    try:
        deadline = time.monotonic() + 60
        while not await worker_polling(settings, process.pid):
            assert process.poll() is None, (tmp_path / "worker.log").read_text()
            assert time.monotonic() < deadline, "the plugin worker did not start polling"
            await asyncio.sleep(0.3)
        yield PluginWorker(settings, env, tmp_path / "ledger.txt", tmp_path / "memos")
    finally:
        process.terminate()
        process.wait(timeout=30)


async def start_loan(dsmo: DsmoClient, worker: PluginWorker, data: dict[str, float]) -> str:
    definition = parse_definition_text((PROJECT / "loan.yaml").read_text(), source="loan.yaml")
    return (await dsmo.start(definition, data, task_queue=worker.settings.temporal.task_queue)).run_id


async def test_a_user_agent_action_and_channel_complete_a_run(
    plugin_worker: PluginWorker, dsmo: DsmoClient, store: ArtifactStore
) -> None:
    run_id = await start_loan(dsmo, plugin_worker, {"amount": 1000, "income": 4000, "debts": 400})
    result = await asyncio.wait_for(dsmo.result(run_id), 60)
    assert result.status == RunStatus.COMPLETED, result.error_message
    assert result.path == ["score", "hold", "approve", "tell"]
    # The async agent's output, checked against its schema, is the stage's artifact in S3.
    score = next(e for e in await dsmo.events(run_id) if e.type == "STAGE_SUCCEEDED" and e.stage == "score")
    stored = store.read_json(score.artifact_uris[-1])
    assert stored["output"] == {"score": 0.1, "run": run_id} and stored["summary"] == {"band": "low"}
    # The action ran once; the channel delivered the message.
    assert plugin_worker.ledger_lines() == [f"hold 1000 {run_id}"]
    (memo,) = plugin_worker.memos.iterdir()
    assert memo.read_text() == "applicant: Approved: 1000"


async def test_a_refused_user_action_compensates_the_user_action_before_it(
    plugin_worker: PluginWorker, dsmo: DsmoClient
) -> None:
    run_id = await start_loan(dsmo, plugin_worker, {"amount": 500, "income": 1000, "debts": 900})
    result = await asyncio.wait_for(dsmo.result(run_id), 60)
    assert result.status == RunStatus.FAILED
    assert "declined" in (result.error_message or "")
    assert result.compensation and result.compensation["status"] == "complete"
    assert plugin_worker.ledger_lines() == [f"hold 500 {run_id}", f"release 500 {run_id}"]


async def test_an_input_that_fails_the_agents_schema_is_a_contract_violation(
    plugin_worker: PluginWorker, dsmo: DsmoClient
) -> None:
    run_id = await start_loan(dsmo, plugin_worker, {"amount": 500, "debts": 900})  # no income
    result = await asyncio.wait_for(dsmo.result(run_id), 60)
    # As any contract violation: recorded, then the definition's fail-safe route.
    assert result.status == RunStatus.COMPLETED and result.path == ["score", "refer"]
    (violation,) = [e for e in await dsmo.events(run_id) if e.type == "CONTRACT_VIOLATION"]
    assert violation.stage == "score" and violation.data["routedTo"] == "refer"
    assert "input does not match its schema: income" in violation.data["reason"]
    assert plugin_worker.ledger_lines() == []  # no action ran
    (memo,) = plugin_worker.memos.iterdir()
    assert memo.read_text() == "underwriter: Referred to a person"


async def test_the_workers_catalog_lists_what_its_plugins_offer(plugin_worker: PluginWorker) -> None:
    listed = await asyncio.to_thread(plugin_worker.cli, "agents", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    offer = json.loads(listed.stdout)
    agents = {row["name"]: row for row in offer["agents"]}
    assert agents["risk-score"]["mode"] == "async" and agents["text-extract"]["mode"] == "sync"
    assert agents["risk-score"]["inputSchema"]["required"] == ["income"]
    assert agents["risk-score"]["summarySchema"]["properties"]["band"] == {"enum": ["low", "high"]}
    actions = {row["name"]: row["compensatable"] for row in offer["actions"]}
    assert actions["hold-funds"] is True and actions["approve"] is False and "reserve-stock" in actions
    assert {row["name"] for row in offer["channels"]} >= {"file", "memo"}


async def test_publishing_checks_the_definition_against_the_running_workers(
    plugin_worker: PluginWorker, tmp_path: Path
) -> None:
    published = await asyncio.to_thread(plugin_worker.cli, "definitions", "publish", "loan.yaml")
    assert published.returncode == 0, published.stderr
    assert "published acme-loan" in published.stdout
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text((PROJECT / "loan.yaml").read_text().replace("agent: risk-score", "agent: fraud-score"))
    refused = await asyncio.to_thread(plugin_worker.cli, "definitions", "publish", str(unknown))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert "offers agent fraud-score" in line
    # With no worker on the task queue the catalog is unknown: published, with a warning.
    elsewhere = {**plugin_worker.env, "DSMO_TASK_QUEUE": f"idle-{uuid.uuid4().hex[:6]}"}
    warned = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), "definitions", "publish", str(unknown)],
        capture_output=True,
        text=True,
        env=elsewhere,
        timeout=60,
    )
    assert warned.returncode == 0, warned.stderr
    assert "warning: no worker polls" in warned.stderr


BAD_PLUGINS = {
    "missing": (None, "module not found"),
    "twice": (
        "import dsmo\n\n@dsmo.agent('text-extract', version='1.0.0')\ndef mine(document, message):\n"
        "    return {}, {}\n",
        "agent text-extract@1.0.0 is registered twice",
    ),
    "signature": (
        "import dsmo\n\n@dsmo.agent('lonely')\ndef lonely(document):\n    return {}, {}\n",
        "must take (document, message)",
    ),
    "schema": (
        "import dsmo\n\n@dsmo.agent('strict', input_schema={'type': 'nonsense'})\n"
        "def strict(document, message):\n    return {}, {}\n",
        "a schema does not compile",
    ),
    "crash": ("raise RuntimeError('no config')\n", "import failed: RuntimeError: no config"),
    "exit": ("import sys\nsys.exit(3)\n", "import failed: the module exits at import (SystemExit: 3)"),
}


@pytest.fixture
def bad_plugin_dir(tmp_path: Path) -> Iterator[Path]:
    for name, (source, _) in BAD_PLUGINS.items():
        if source is not None:
            (tmp_path / f"bad_{name}.py").write_text(source)
    yield tmp_path


@pytest.mark.parametrize("name", sorted(BAD_PLUGINS))
def test_a_bad_plugin_stops_the_worker_with_one_line(name: str, bad_plugin_dir: Path) -> None:
    # Plugins load before the worker connects: no stack is needed to see the error.
    # DSMO's examples first, so a plugin that registers text-extract again registers it twice.
    env = {**os.environ, "TEMPORAL_ADDRESS": "127.0.0.1:1", "DSMO_METRICS_BIND": "off", "DSMO_LOAD": "dsmo_examples"}
    proc = subprocess.run(
        [str(BIN / "dsmo"), "worker", "--load", f"bad_{name}"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=bad_plugin_dir,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("dsmo worker:")]
    assert f"plugin bad_{name}" in line and BAD_PLUGINS[name][1] in line


async def test_publishing_without_temporal_warns_instead_of_failing(plugin_worker: PluginWorker) -> None:
    # Publishing writes to the artifact store only; an unreachable Temporal leaves the check undone.
    offline = {**plugin_worker.env, "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    published = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), "definitions", "publish", "loan.yaml"],
        capture_output=True,
        text=True,
        env=offline,
        cwd=PROJECT,
        timeout=120,
        check=False,
    )
    assert published.returncode == 0, published.stderr
    assert "warning: Temporal cannot be reached" in published.stderr
    assert "published acme-loan" in published.stdout
