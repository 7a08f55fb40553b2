"""The public client (`from dsmo import DsmoClient`): publish a definition, start it by name (its
latest or a pinned version), list runs, read an ended run's status and trail with no worker,
replay, and cancel — the way a Python user drives DSMO without the CLI."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dsmo import (
    DefinitionNotFound,
    DsmoClient,
    RunClosed,
    RunStatus,
    RunSummary,
    Settings,
    parse_definition_text,
)
from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.messaging import FileChannel
from dsmo.client.definitions_client import PublishedAgent
from dsmo.worker import build_worker
from tests import polling
from tests.conftest import Harness
from tests.fresh_venv import FreshVenv
from tests.polling import until_value

pytestmark = pytest.mark.integration

PROJECT = Path(__file__).resolve().parents[2] / "coexist_project"
BIN = Path(sys.executable).parent


def _agent() -> str:
    return f"client-api-{uuid.uuid4().hex[:8]}"


def _definition_text(agent: str, message: str) -> str:
    return f"""
agent: {agent}
version: "1.0.0"
inputs: [name]
start: hello
nodes:
  hello:
    actionType: send_message
    parameters: {{to: "{{{{name}}}}", message: "{message}"}}
"""


# -- a user with the wheel only --------------------------------------------------------------

USER_SCRIPT = """
import asyncio, json, sys
from dsmo import DsmoClient, load_definition
from dsmo.errors import DefinitionNotFound
from dsmo.settings import Settings
from polling import until_value  # the tests' helper, copied beside this script (no tests package here)


async def publish_and_start(path, agent, task_queue):
    client = await DsmoClient.connect(Settings.from_env())
    definition = load_definition(path)
    published = await client.definitions.publish(definition, task_queue=task_queue)  # the offer checked
    run = await client.start(agent, {"text": "The lamp is broken and slow"}, task_queue=task_queue)
    result = await asyncio.wait_for(run.result(), 60)  # followed by its handle
    try:
        await client.start(agent + "-never-published", {}, task_queue=task_queue)
        refused = None
    except DefinitionNotFound as err:
        refused = str(err)
    print(json.dumps({
        "runId": run.run_id, "started": run.started.status, "version": definition.workflow_version,
        "published": published.workflow_version, "unchecked": published.unchecked,
        "status": result.status.value, "refused": refused,
    }))


async def read(agent, run_id):
    client = await DsmoClient.connect(Settings.from_env())
    # Visibility is written asynchronously: the list shows the run's end a moment after it ended.
    async def listed():
        return [row async for row in client.runs(agent=agent)]

    runs = await until_value(
        listed, lambda rows: [row.status for row in rows] == ["completed"], "the run listed as completed"
    )
    run = client.run(run_id)
    status = await run.status()
    trail = await run.events()
    print(json.dumps({
        "runs": [[row.run_id, row.status, row.workflow_version] for row in runs],
        "status": status.status.value,
        "path": status.path,
        "problem": status.problem,
        "trail": [event.type for event in trail],
        "failedCompensations": [row.run_id for row in await client.failed_compensations()],
        "stuck": [row.run_id for row in await client.stuck_runs()],
    }))


if sys.argv[1] == "start":
    asyncio.run(publish_and_start(*sys.argv[2:]))
else:
    asyncio.run(read(*sys.argv[2:]))
"""


def test_a_user_with_the_wheel_publishes_starts_by_name_follows_the_handle_and_reads_an_ended_trail(
    fresh_venv: FreshVenv, stack_settings: Settings, tmp_path: Path
) -> None:
    agent = _agent()
    source = (PROJECT / "definitions" / "review.yaml").read_text()
    definition = tmp_path / "review.yaml"
    definition.write_text(source.replace("agent: review-triage", f"agent: {agent}"))
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    shutil.copy(polling.__file__, tmp_path / "polling.py")
    settings = stack_settings.with_changes(
        temporal={"task_queue": f"public-{uuid.uuid4().hex[:8]}"}, worker={"metrics_bind": ""}
    )
    env = {**settings.to_env(), "DSMO_OUTBOX_DIR": str(tmp_path / "outbox")}

    with fresh_venv.worker(settings, "--load", "activities.review", cwd=PROJECT, env=env, log=tmp_path / "w.log"):
        started = fresh_venv.run(
            "python", str(script), "start", str(definition), agent, settings.temporal.task_queue, cwd=tmp_path, env=env
        )
        assert started.returncode == 0, started.stderr
    run = json.loads(started.stdout)
    assert run["status"] == "completed" and run["started"] == "running"
    assert run["published"] == run["version"] and run["unchecked"] == ""  # the worker offers what it names
    assert run["refused"] is not None and "-never-published" in run["refused"]

    # The worker has stopped: the list comes from visibility, status and trail from what the run left.
    read = fresh_venv.run("python", str(script), "read", agent, run["runId"], cwd=tmp_path, env=env)
    assert read.returncode == 0, read.stderr
    seen = json.loads(read.stdout)
    assert seen["runs"] == [[run["runId"], "completed", run["version"]]]
    assert seen["status"] == "completed" and seen["path"] == ["tone", "escalate"] and seen["problem"] is None
    assert seen["trail"][0] == "RUN_CREATED" and "RUN_COMPLETED" in seen["trail"]
    assert seen["trail"].count("STAGE_SUCCEEDED") == 1  # the agent's stage (messages are not stages)
    # The recovery lists answer without a worker; an ended run is in neither.
    assert run["runId"] not in seen["failedCompensations"] and run["runId"] not in seen["stuck"]


# -- start by name -----------------------------------------------------------------------------


async def test_start_by_name_runs_the_latest_published_version_or_the_pinned_one(harness: Harness) -> None:
    client = harness.dsmo
    agent = _agent()
    first = parse_definition_text(_definition_text(agent, "first"), source="first.yaml")
    second = parse_definition_text(_definition_text(agent, "second"), source="second.yaml")
    assert (await client.publish(first)).endswith(f"configs/{first.workflow_version}.json")
    await client.publish(second)

    latest = (await client.start(agent, {"name": "ada"}, task_queue=harness.task_queue)).run_id
    pinned = (
        await client.start(agent, {"name": "ada"}, version=first.workflow_version, task_queue=harness.task_queue)
    ).run_id
    for run_id in (latest, pinned):
        harness.started.append(run_id)
        assert (await client.result(run_id)).status is RunStatus.COMPLETED
    assert [m["message"] for m in harness.messages(latest)] == ["second"]
    assert [m["message"] for m in harness.messages(pinned)] == ["first"]
    assert (await client.status(latest)).workflow_version == second.workflow_version
    assert (await client.status(pinned)).workflow_version == first.workflow_version

    listed = [entry for entry in await client.definitions() if entry.agent == agent]
    assert listed == [PublishedAgent(agent, second.workflow_version, [first.workflow_version, second.workflow_version])]
    assert await client.versions(agent) == [first.workflow_version, second.workflow_version]
    assert (await client.definition(agent)).workflow_version == second.workflow_version


async def test_dsmo_start_takes_an_agent_name_and_a_pinned_version(harness: Harness) -> None:
    agent = _agent()
    first = parse_definition_text(_definition_text(agent, "first"), source="first.yaml")
    await harness.dsmo.publish(first)
    await harness.dsmo.publish(parse_definition_text(_definition_text(agent, "second"), source="second.yaml"))

    def dsmo_cli(*args: str) -> subprocess.CompletedProcess[str]:
        cli = [str(BIN / "dsmo"), *args]
        return subprocess.run(cli, capture_output=True, text=True, env=harness.cli_env(), check=False)

    started = await asyncio.to_thread(
        dsmo_cli, "start", agent, "--version", first.workflow_version, "--input", '{"name": "ada"}', "--wait", "--json"
    )
    assert started.returncode == 0, started.stderr
    shown = json.loads(started.stdout)
    harness.started.append(shown["runId"])
    assert shown["workflowVersion"] == first.workflow_version and shown["status"] == "completed"
    assert [m["message"] for m in harness.messages(shown["runId"])] == ["first"]

    # A version by its label, as migrate, fork and replay take it; a label two versions share is named.
    third = _definition_text(agent, "third").replace('"1.0.0"', '"3.0.0"')
    await harness.dsmo.publish(parse_definition_text(third, source="third.yaml"))
    labelled = await asyncio.to_thread(
        dsmo_cli, "start", agent, "--version", "3.0.0", "--input", '{"name": "b"}', "--wait"
    )
    assert labelled.returncode == 0, labelled.stderr
    shared = await asyncio.to_thread(dsmo_cli, "start", agent, "--version", "1.0.0")
    assert shared.returncode == 1 and "labelled '1.0.0'" in shared.stderr and shared.stderr.strip().count("\n") == 0

    unknown = await asyncio.to_thread(dsmo_cli, "start", f"{agent}-nope")
    assert unknown.returncode == 1 and unknown.stderr.strip().count("\n") == 0
    assert f"{agent}-nope" in unknown.stderr and "Traceback" not in unknown.stderr


async def test_start_by_name_refuses_an_unknown_agent_or_version_in_one_line_naming_it(dsmo: DsmoClient) -> None:
    agent = _agent()
    with pytest.raises(DefinitionNotFound) as unknown:
        await dsmo.start(agent, {})
    assert agent in str(unknown.value) and "\n" not in str(unknown.value)
    assert unknown.value.code == "definition_not_found"

    await dsmo.publish(parse_definition_text(_definition_text(agent, "hi"), source="hi.yaml"))
    missing = "0" * 64
    with pytest.raises(DefinitionNotFound) as unknown_version:
        await dsmo.start(agent, {}, version=missing)
    assert missing in str(unknown_version.value) and "\n" not in str(unknown_version.value)

    definition = await dsmo.definition(agent)
    with pytest.raises(ValueError, match="version"):
        await dsmo.start(definition, {}, version=definition.workflow_version)


# -- listing, status without a worker, replay, cancel -------------------------------------------


WAITING = """
agent: {agent}
start: ask
nodes:
  ask:
    actionType: wait_for_response
    parameters: {{timeout: 24h}}
"""


async def test_runs_lists_waiting_runs_with_what_they_wait_for(harness: Harness) -> None:
    agent = _agent()
    definition = parse_definition_text(WAITING.format(agent=agent), source="waiting.yaml")
    run_id = await harness.start(definition)
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    view = await harness.dsmo.status(run_id)

    async def waiting() -> list[RunSummary]:
        return [row async for row in harness.dsmo.runs(agent=agent, status="waiting")]

    # Visibility is written asynchronously.
    rows = await until_value(
        waiting, lambda rows: len(rows) == 1 and rows[0].waiting_until is not None, "the run listed as waiting"
    )
    assert [(row.run_id, row.agent, row.status, row.waiting_for) for row in rows] == [
        (run_id, agent, "waiting", "response")
    ]
    assert rows[0].waiting_until == view.waiting_until and rows[0].closed_at is None
    queried = [row.run_id async for row in harness.dsmo.runs(f"WorkflowId = '{run_id}'")]
    assert queried == [run_id]
    # `dsmo runs list` shows the same rows.
    listed = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), "runs", "list", "--agent", agent, "--status", "waiting", "--json"],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    (shown,) = json.loads(listed.stdout)
    assert (shown["run_id"], shown["status"], shown["waiting_for"]) == (run_id, "waiting", "response")
    assert view.waiting_until is not None and shown["waiting_until"] == view.waiting_until.isoformat()

    await harness.dsmo.cancel(run_id, reason="done with the test", by="tester")
    ended = await harness.dsmo.result(run_id)
    assert ended.status is RunStatus.CANCELLED and ended.cancelled_by == "tester"
    with pytest.raises(RunClosed):
        await harness.dsmo.cancel(run_id, reason="again")

    async def statuses() -> list[str]:
        return [row.status async for row in harness.dsmo.runs(agent=agent)]

    await until_value(statuses, lambda found: found == ["cancelled"], "the run listed as cancelled")


async def test_status_and_trail_of_an_ended_run_need_no_worker(
    dsmo: DsmoClient, store: ArtifactStore, tmp_path: Path
) -> None:
    agent = _agent()
    definition = parse_definition_text(_definition_text(agent, "bye"), source="bye.yaml")
    task_queue = f"gone-{uuid.uuid4().hex[:8]}"
    async with build_worker(dsmo.temporal, task_queue=task_queue, store=store, channel=FileChannel(tmp_path)):
        run_id = (await dsmo.start(definition, {"name": "ada"}, task_queue=task_queue)).run_id
        await dsmo.result(run_id)
        with_worker = await dsmo.status(run_id)

    # The worker is gone: nothing polls the run's task queue, and nothing needs to.
    view = await dsmo.status(run_id)
    assert view.status is RunStatus.COMPLETED and view.problem is None
    assert view.path == with_worker.path == ["hello"]
    assert view.config_ref == with_worker.config_ref
    assert (view.agent, view.workflow_version, view.result_type) == (agent, definition.workflow_version, "success")
    trail = await dsmo.events(run_id)
    assert trail[0].type == "RUN_CREATED" and "RUN_COMPLETED" in [event.type for event in trail]
