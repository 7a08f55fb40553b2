"""The audit export against the real S3 store: write once, extend, and the lost-workflow-task case.

The reliability suite found the last case: a worker killed after the export's local activity
wrote `audit/{run}.jsonl` but before the workflow task that ran it completed. The new worker runs
that task again; its closing events carry the new task's timestamps, so the file differs from the
trail the history will hold. Only a file written by the same workflow execution may be replaced.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.audit_log import EXECUTION_META, AuditActivities, audit_key, chain, verify_lines
from dsmo.activities.messaging import FileChannel
from dsmo.client.client_errors import NoWorker
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.trail_io import AuditExport
from tests.conftest import Harness, definition_from

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

pytestmark = pytest.mark.integration


def events(*kinds: str, at: str = "2026-11-22T03:00:00Z") -> list[dict[str, Any]]:
    return [{"seq": n, "type": kind, "at": at} for n, kind in enumerate(kinds, start=1)]


def export(store: ArtifactStore, run_id: str, trail: list[dict[str, Any]], execution: str) -> str:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_run_id=execution)
    uri: str = asyncio.run(env.run(AuditActivities(store).export_audit, AuditExport(run_id=run_id, events=trail)))
    return uri


def stored(store: ArtifactStore, run_id: str) -> bytes:
    return store.read_bytes(store.uri(audit_key(run_id)))


def test_first_export_writes_the_chain_and_names_its_execution(store: ArtifactStore) -> None:
    run_id = f"audit-{uuid.uuid4().hex[:8]}"
    trail = events("RUN_STARTED", "RUN_COMPLETED")
    assert export(store, run_id, trail, "exec-1") == store.uri(audit_key(run_id))
    assert stored(store, run_id) == chain(trail)
    assert verify_lines(stored(store, run_id), trail).ok
    assert store.metadata(audit_key(run_id))[EXECUTION_META] == "exec-1"


def test_the_event_loops_put_writes_what_the_thread_path_writes(store: ArtifactStore) -> None:
    # The usual export is one put from the event loop (obstore); a store without obstore (or a
    # run with segments) takes boto3 on a thread. Readers and `dsmo audit verify` see no difference.
    boto_only = ArtifactStore(store.s3, store.bucket)
    trail = events("RUN_STARTED", "RUN_COMPLETED")
    written = {}
    for name, writer in (("loop", store), ("thread", boto_only)):
        run_id = f"audit-{name}-{uuid.uuid4().hex[:8]}"
        export(writer, run_id, trail, "exec-1")
        head = store.s3.head_object(Bucket=store.bucket, Key=audit_key(run_id))
        written[name] = (stored(store, run_id), head["ContentType"], head["Metadata"])
    body, content_type, metadata = written["loop"]
    assert body == chain(trail) and content_type == "application/x-ndjson"
    assert metadata == {EXECUTION_META: "exec-1", "sha256": hashlib.sha256(body).hexdigest()}
    assert written["thread"] == written["loop"]


def test_a_repeat_or_a_longer_trail_is_accepted(store: ArtifactStore) -> None:
    run_id = f"audit-{uuid.uuid4().hex[:8]}"
    export(store, run_id, events("RUN_STARTED"), "exec-1")
    export(store, run_id, events("RUN_STARTED"), "exec-1")
    longer = events("RUN_STARTED", "RUN_COMPLETED")
    export(store, run_id, longer, "exec-2")
    assert stored(store, run_id) == chain(longer)


def test_a_file_from_an_uncommitted_task_of_the_same_execution_is_replaced(store: ArtifactStore) -> None:
    run_id = f"audit-{uuid.uuid4().hex[:8]}"
    phantom = events("RUN_STARTED", "RUN_COMPLETED", at="2026-11-22T03:00:00Z")
    export(store, run_id, phantom, "exec-1")
    # The task ran again on another worker: same events, the new task's time.
    committed = events("RUN_STARTED", "RUN_COMPLETED", at="2026-11-22T03:00:09Z")
    export(store, run_id, committed, "exec-1")
    assert stored(store, run_id) == chain(committed)
    assert verify_lines(stored(store, run_id), committed).ok


def test_another_executions_different_trail_is_refused_and_the_file_kept(store: ArtifactStore) -> None:
    run_id = f"audit-{uuid.uuid4().hex[:8]}"
    original = events("RUN_STARTED", "RUN_COMPLETED")
    export(store, run_id, original, "exec-1")
    with pytest.raises(ApplicationError, match="refusing to rewrite an audit trail") as refused:
        export(store, run_id, events("RUN_STARTED", "RUN_ABORTED"), "exec-2")
    assert refused.value.non_retryable and refused.value.type == "AuditConflict"
    assert stored(store, run_id) == chain(original)


async def test_an_ended_runs_trail_is_read_from_its_export_with_no_worker(harness: Harness) -> None:
    dsmo = harness.dsmo
    queue = f"ended-{uuid.uuid4().hex[:8]}"
    async with build_worker(dsmo.temporal, task_queue=queue, store=harness.store, channel=FileChannel(harness.outbox)):
        run_id = (
            await dsmo.start(
                definition_from(EXAMPLES / "welcome_pack.yaml"),
                {"candidate": {"name": "A", "email": "a@x"}},
                task_queue=queue,
            )
        ).run_id
        harness.started.append(run_id)
        assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
        live = await dsmo.events(run_id, live=True)
    # No worker polls the run's queue now: the run cannot answer a query, but its trail was exported.
    assert await dsmo.events(run_id) == live
    assert live[-1].type == "RUN_COMPLETED"
    with pytest.raises(NoWorker):
        await dsmo.events(run_id, live=True)
    shown = await asyncio.to_thread(
        subprocess.run,
        [str(Path(sys.executable).with_name("dsmo")), "events", run_id],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=120,
    )
    assert shown.returncode == 0 and "RUN_COMPLETED" in shown.stdout, shown.stderr
