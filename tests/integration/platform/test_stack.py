"""`dsmo dev up | down | status`: idempotent start, stop by pid only, state that survives restarts."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dsmo.activities.artifacts import ArtifactMissing, ArtifactStore
from dsmo.activities.messaging import FileChannel
from dsmo.client.client_errors import RunNotFound
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.devstack.processes import process_alive
from dsmo.devstack.stack import DevStack
from dsmo.runtime.provisioning import temporal_reachable
from dsmo.runtime.storage import s3_client
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from tests.conftest import definition_from
from tests.stack import private_settings

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "candidate_screening.yaml"


async def dsmo_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **settings.to_env()}
    return await asyncio.to_thread(
        subprocess.run, [str(BIN / "dsmo"), *args], capture_output=True, text=True, env=env, timeout=120
    )


def process_environ(pid: int | None) -> dict[str, str]:
    assert pid is not None
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in entries if b"=" in entry)


def states(output: str) -> dict[str, str]:
    """``name  state  endpoint`` lines -> {name: state}."""
    found = {}
    for line in output.splitlines():
        for state in ("running (not started by dsmo)", "already running", "started", "stopped", "not running"):
            name = line.split(" ", 1)[0]
            if state in line and name in ("s3", "temporal", "worker"):
                found[name] = state
                break
    return found


async def test_worker_process_up_is_idempotent_and_down_leaves_others(stack_settings: Settings, tmp_path: Path) -> None:
    settings = stack_settings.with_changes(
        state_dir=tmp_path / "state",
        temporal={"task_queue": f"dev-{uuid.uuid4().hex[:8]}"},
        messaging={"outbox_dir_override": str(tmp_path / "outbox")},
    )
    first = await dsmo_cli(settings, "dev", "up", "--worker")
    assert first.returncode == 0, first.stderr
    # The servers belong to someone else (the session's stack): found and reused, not restarted.
    assert states(first.stdout) == {
        "s3": "running (not started by dsmo)",
        "temporal": "running (not started by dsmo)",
        "worker": "started",
    }
    second = await dsmo_cli(settings, "dev", "up", "--worker")
    assert states(second.stdout)["worker"] == "already running"
    status = await dsmo_cli(settings, "dev", "status")
    assert status.returncode == 0 and "worker" in status.stdout

    # The background worker (python -m dsmo.worker) runs a whole run.
    started = await dsmo_cli(settings, "start", str(EXAMPLE), "--input", '{"candidate": {"name": "W", "phone": "9"}}')
    run_id = started.stdout.split()[1]
    dsmo = await DsmoClient.connect(settings)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    assert (await dsmo_cli(settings, "respond", run_id, "ok")).returncode == 0
    assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
    assert len(list((tmp_path / "outbox" / run_id).glob("*.json"))) == 2

    worker_pid = int((settings.state_dir / "run" / "worker.pid").read_text().split('"pid": ')[1].split(",")[0])
    down = await dsmo_cli(settings, "dev", "down")
    assert states(down.stdout) == {"worker": "stopped", "temporal": "not running", "s3": "not running"}
    assert not process_alive(worker_pid)  # a zombie awaiting its reaper counts as gone
    # What `up` did not start is still serving.
    assert await temporal_reachable(stack_settings.temporal.address, stack_settings.temporal.namespace)


async def test_stack_from_nothing_survives_a_restart(tmp_path: Path) -> None:
    settings = private_settings(tmp_path / "own")
    stack = DevStack(settings)
    try:
        reports = await stack.up(timeout=90)
        assert {r.name: r.state for r in reports} == {"s3": "started", "temporal": "started"}
        assert {r.name: r.state for r in await stack.up()} == {"s3": "already running", "temporal": "already running"}
        assert (settings.state_dir / "temporal.db").exists()
        assert (settings.state_dir / "seaweed-s3.json").stat().st_mode & 0o777 == 0o600  # it holds the S3 secret
        # Both Go services get half the cores for their schedulers, unless the environment set it.
        s3_env, temporal_env = (process_environ(proc.pid()) for proc in (stack.s3, stack.temporal))
        expected = os.environ.get("GOMAXPROCS") or str(max(1, (os.cpu_count() or 2) // 2))
        assert s3_env.get("GOMAXPROCS") == temporal_env.get("GOMAXPROCS") == expected
        assert (settings.state_dir / "logs" / "temporal.log").exists() and (
            settings.state_dir / "logs" / "s3.log"
        ).exists()

        # A run waits; the whole stack stops and starts again; the run resumes on its event.
        dsmo = await DsmoClient.connect(settings)
        store = ArtifactStore(s3_client(settings), settings.store.bucket)
        definition = definition_from(EXAMPLE)
        channel = FileChannel(settings.outbox_dir)  # the stack's own outbox, as `dsmo worker` writes it
        async with build_worker(dsmo.temporal, task_queue="restart", store=store, channel=channel):
            run_ids = [
                (
                    await dsmo.start(definition, {"candidate": {"name": "R", "phone": str(n)}}, task_queue="restart")
                ).run_id
                for n in range(3)
            ]
            for run_id in run_ids:
                await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        pids = [stack.temporal.pid(), stack.s3.pid()]
        assert {r.name: r.state for r in stack.down()} == {
            "worker": "not running",
            "temporal": "stopped",
            "s3": "stopped",
        }
        assert not any(process_alive(pid) for pid in pids if pid)
        assert not await temporal_reachable(settings.temporal.address, settings.temporal.namespace, timeout=1)

        await stack.up(timeout=90)
        dsmo = await DsmoClient.connect(settings)
        store = ArtifactStore(s3_client(settings), settings.store.bucket)
        async with build_worker(dsmo.temporal, task_queue="restart", store=store, channel=channel):
            for run_id in run_ids:
                assert (await dsmo.status(run_id)).status is RunStatus.WAITING
                await dsmo.respond(run_id, "after restart")
            results = [await dsmo.result(run_id) for run_id in run_ids]
        for result in results:
            assert result.status is RunStatus.COMPLETED and result.variables["lastResponse"] == "after restart"
            # The artifact written before the restart is still in the store.
            assert store.read_json(result.variables["stages"]["profile"]["outputUri"])["summary"]["firstName"] == "R"

        # `dsmo dev reset`: stopped, and the stack starts again with no runs and no artifacts.
        reset = await dsmo_cli(settings, "dev", "reset", "--yes")
        assert reset.returncode == 0, reset.stderr
        assert "temporal.db" in reset.stdout and "seaweed" in reset.stdout and "outbox" in reset.stdout
        assert stack.stored_data() == [] and (settings.state_dir / "logs" / "temporal.log").exists()
        # Its messages went with its runs: a run id used again finds no old message taken as sent.
        assert not settings.outbox_dir.exists()
        assert not await temporal_reachable(settings.temporal.address, settings.temporal.namespace, timeout=1)
        await stack.up(timeout=90)
        dsmo = await DsmoClient.connect(settings)
        with pytest.raises(RunNotFound):
            await dsmo.status(run_ids[0])
        store = ArtifactStore(s3_client(settings), settings.store.bucket)
        with pytest.raises(ArtifactMissing):
            store.read_json(results[0].variables["stages"]["profile"]["outputUri"])
    finally:
        stack.down()


async def test_reset_deletes_nothing_while_a_service_it_did_not_start_answers(
    stack_settings: Settings, tmp_path: Path
) -> None:
    # The session's stack answers on these ports but was not started from this state directory.
    settings = stack_settings.with_changes(state_dir=tmp_path / "state")
    kept = settings.state_dir / "temporal.db"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"runs")
    refused = await dsmo_cli(settings, "dev", "reset", "--yes")
    assert refused.returncode == 1
    assert refused.stderr.strip().endswith("stop it first. Nothing was deleted.")
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    assert kept.read_bytes() == b"runs"
    assert await temporal_reachable(stack_settings.temporal.address, stack_settings.temporal.namespace)

    asked = await dsmo_cli(settings, "dev", "reset")  # no --yes, no answer: aborted, as Ctrl-C
    assert asked.returncode == 130 and "aborted" in asked.stderr and kept.exists()


async def test_the_embedded_database_overwrites_what_it_deletes(stack_settings: Settings) -> None:
    """Erased histories leave no copy in the SQLite file's free pages: the stack's Temporal runs with
    ``secure_delete=on`` (what its write-ahead log may still hold is a documented limit)."""
    temporal = next(report for report in await DevStack(stack_settings).status() if report.name == "temporal")
    if temporal.pid is None:
        pytest.skip("the suite reuses a Temporal that dsmo did not start")
    argv = Path(f"/proc/{temporal.pid}/cmdline").read_bytes().split(b"\0")
    pragmas = [argv[index + 1].decode() for index, each in enumerate(argv[:-1]) if each == b"--sqlite-pragma"]
    assert "secure_delete=on" in pragmas and "journal_mode=wal" in pragmas
