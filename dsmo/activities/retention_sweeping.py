"""Retention: removing what is due, each run and object counted once however often a sweep retries.

When a run ends, its trail's export writes a marker ``retention/ended/{due}/{run}.json``
(activities/retention_markers.py). A sweep (`engine/retention_sweep.py`, on a Temporal Schedule)
takes the markers due, oldest first, and for each:

1. lists the run's objects and its ended Temporal executions (every generation, from Temporal's
   histories), and writes both counts into the marker (once: a retry reads them back, whatever it
   already deleted);
2. deletes the objects, the messages the file channel wrote for the run on this worker's machine
   (``{outbox}/{run}/``), and those executions (never a running one);
3. writes the trail's marker ``retention/trails/{due}/{run}.json`` (if a trail period applies);
4. writes ``retention/done/run/{run}.json`` naming the sweep and the counts, create-only: the one
   sweep that writes it counts the run (two sweeps, or two markers of one run, count it once);
5. deletes the marker.

A sweep's outcome is the sum of the done records naming it (`record_sweep`), not what an attempt
remembered: an attempt that dies after step 4 loses nothing. A marker that cannot be read (not
JSON, no run) is moved to ``retention/failed/`` so one bad object does not stop every sweep.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest, DescribeWorkflowExecutionRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.audit_log import audit_key
from dsmo.activities.messaging import remove_outbox_messages
from dsmo.activities.retention_markers import (
    DONE_PREFIX,
    ENDED_PREFIX,
    FAILED_PREFIX,
    SWEEPS_PREFIX,
    TRAILS_PREFIX,
    due_key,
    removed_trail_key,
    run_prefixes,
)
from dsmo.activities.run_generations import generations
from dsmo.workflows.contracts.retention_io import RECORD_SWEEP, SWEEP_RETENTION, SweepBatch, SweepCounts, SweepOutcome

# Times one marker may fail before it is set aside for a person to look at.
MARKER_ATTEMPTS = 5
# The store's clock against the workflow's: objects written this long after the run's end are still its.
WRITE_SLACK = timedelta(minutes=10)


class RetentionActivities:
    """The sweep's activities over one store and one Temporal client."""

    def __init__(
        self,
        store: ArtifactStore,
        client: Client,
        *,
        outboxes: Sequence[Path] = (),
        fault: Callable[[str, str], None] | None = None,
    ) -> None:
        self.store = store
        self.client = client
        self.outboxes = list(outboxes)  # the file channels' folders on this worker's machine
        self._fault = fault  # tests: told each step (and its run), may raise (a worker killed there)

    @activity.defn(name=SWEEP_RETENTION)
    async def sweep_retention(self, batch: SweepBatch) -> SweepCounts:
        """Remove up to ``batch.limit`` ended runs' data due by ``batch.as_of``, then trails.

        Returns:
            What this attempt removed (progress); the sweep's outcome is counted by `record_sweep`.
        """
        counts = SweepCounts()
        for key in self._due(ENDED_PREFIX, batch.as_of, batch.limit):
            counts = counts.plus(await self._guarded(key, self._remove_run(key, batch.sweep_id)))
        taken = counts.runs + counts.failed
        trails = self._due(TRAILS_PREFIX, batch.as_of, batch.limit - taken) if taken < batch.limit else []
        for key in trails:
            counts = counts.plus(await self._guarded(key, asyncio.to_thread(self._remove_trail, key, batch.sweep_id)))
        counts.more = counts.runs + counts.trails + counts.failed >= batch.limit
        return counts

    @activity.defn(name=RECORD_SWEEP)
    def record_sweep(self, outcome: SweepOutcome) -> SweepOutcome:
        """Count the sweep from its done records, keep the outcome (write-once), then drop the records."""
        mine: list[str] = []
        counts = SweepCounts(failed=outcome.counts.failed)
        for uri in self.store.list_uris(DONE_PREFIX):
            key = self.store.key_of(uri)[1]
            record = self._marker(key) or {}
            if record.get("sweepId") != outcome.sweep_id:
                continue
            mine.append(key)
            if key.startswith(f"{DONE_PREFIX}run/"):
                counts = counts.plus(
                    SweepCounts(runs=1, objects=int(record["objects"]), histories=int(record["histories"]))
                )
            else:
                counts = counts.plus(SweepCounts(trails=1))
        counted = outcome.model_copy(update={"counts": counts})
        key = f"{SWEEPS_PREFIX}{outcome.as_of.astimezone(UTC):%Y%m%dT%H%M%S}-{outcome.sweep_id}.json"
        stored = self.store.put_json_once(key, counted.model_dump(mode="json"))
        if not stored.created:  # recorded by an earlier attempt, whose done records are gone
            return SweepOutcome.model_validate(self.store.read_json(stored.uri))
        self.store.delete_keys(mine)
        return counted

    def _due(self, prefix: str, as_of: datetime, limit: int) -> list[str]:
        """Marker keys due by ``as_of``, oldest first, at most ``limit``."""
        cutoff = f"{prefix}{as_of.astimezone(UTC):%Y%m%dT%H%M}0"  # past every key of that minute
        found: list[str] = []
        pages = self.store.s3.get_paginator("list_objects_v2").paginate(Bucket=self.store.bucket, Prefix=prefix)
        for page in pages:
            for item in page.get("Contents", []):
                if item["Key"] >= cutoff or len(found) >= limit:
                    return found
                found.append(item["Key"])
        return found

    async def _remove_run(self, key: str, sweep_id: str) -> SweepCounts:
        marker = self._marker(key)
        if marker is None:
            return SweepCounts()  # another sweep finished it
        try:
            run_id, versions = str(marker["runId"]), [str(version) for version in marker["versions"]]
        except (KeyError, TypeError):
            return self._set_aside(key)
        # Only what the run wrote: an id reused once Temporal forgot the run is another run's now.
        ended = datetime.fromisoformat(str(marker["endedAt"])) if marker.get("endedAt") else None
        keys = [
            name
            for prefix in run_prefixes(run_id, versions)
            for name, written in self.store.list_modified(prefix)
            if ended is None or written <= ended + WRITE_SLACK
        ]
        if "objects" not in marker:
            marker["objects"], marker["executions"] = len(keys), await self._ended_executions(run_id)
            self.store.s3.put_object(Bucket=self.store.bucket, Key=key, Body=json.dumps(marker).encode())
        self._step("counted", run_id)
        self.store.delete_keys(keys)
        for outbox in self.outboxes:
            await asyncio.to_thread(remove_outbox_messages, outbox, [run_id])
        self._step("objects deleted", run_id)
        for execution in marker["executions"]:
            await self._delete_execution(run_id, str(execution))
        if marker.get("trailDue"):
            trail_due = datetime.fromisoformat(str(marker["trailDue"]))
            self.store.put_if_absent(due_key(TRAILS_PREFIX, trail_due, run_id), json.dumps({"runId": run_id}).encode())
        done = {"sweepId": sweep_id, "objects": marker["objects"], "histories": len(marker["executions"])}
        counted = self.store.put_if_absent(f"{DONE_PREFIX}run/{run_id}.json", json.dumps(done).encode())
        self._step("done", run_id)
        self.store.delete_keys([key])
        if not counted:
            return SweepCounts()
        return SweepCounts(runs=1, objects=int(marker["objects"]), histories=len(marker["executions"]))

    def _remove_trail(self, key: str, sweep_id: str) -> SweepCounts:
        marker = self._marker(key)
        if marker is None:
            return SweepCounts()
        if "runId" not in marker:
            return self._set_aside(key)
        run_id = str(marker["runId"])
        segments = [self.store.key_of(uri)[1] for uri in self.store.list_uris(f"audit/{run_id}/")]
        # Before the trail goes (the done record below is dropped once the sweep is counted).
        self.store.put_if_absent(removed_trail_key(run_id), json.dumps({"sweepId": sweep_id}).encode())
        self.store.delete_keys([audit_key(run_id), *segments])
        counted = self.store.put_if_absent(
            f"{DONE_PREFIX}trail/{run_id}.json", json.dumps({"sweepId": sweep_id}).encode()
        )
        self.store.delete_keys([key])
        return SweepCounts(trails=1) if counted else SweepCounts()

    async def _guarded(self, key: str, removal: Awaitable[SweepCounts]) -> SweepCounts:
        """One marker's removal; a marker that keeps failing is set aside, so it stops no sweep.

        Each failure is counted in the marker; the attempt fails (Temporal retries it) until the
        marker has failed `MARKER_ATTEMPTS` times, when it is moved to ``retention/failed/``.
        """
        try:
            return await removal
        except Exception:
            marker = self._marker(key)
            if marker is None:
                raise
            marker["failures"] = int(marker.get("failures", 0)) + 1
            if marker["failures"] >= MARKER_ATTEMPTS:
                activity.logger.exception("retention marker %s failed %d times", key, MARKER_ATTEMPTS)
                return self._set_aside(key)
            self.store.s3.put_object(Bucket=self.store.bucket, Key=key, Body=json.dumps(marker).encode())
            raise

    def _set_aside(self, key: str) -> SweepCounts:
        """Move a marker the sweep cannot read out of its way (kept for a person to look at)."""
        body = self.store.stored_or_none(key) or b""
        self.store.put_json_bytes(FAILED_PREFIX + key.removeprefix("retention/"), body)
        self.store.delete_keys([key])
        activity.logger.warning("retention marker %s cannot be read; moved to %s", key, FAILED_PREFIX)
        return SweepCounts(failed=1)

    def _marker(self, key: str) -> dict[str, Any] | None:
        body = self.store.stored_or_none(key)
        if body is None:
            return None
        try:
            found = json.loads(body)
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}

    async def _ended_executions(self, run_id: str) -> list[str]:
        """The run's Temporal executions, every continue-as-new generation, once its current one ended.

        Walked through Temporal's own histories from the current execution (`generations`), so a
        generation visibility has not indexed yet is deleted too. None while the current execution
        runs: an id reused once the old history went is another run's now.
        """
        request = DescribeWorkflowExecutionRequest(
            namespace=self.client.namespace, execution=WorkflowExecution(workflow_id=run_id)
        )
        try:  # the raw answer: the time-skipping server's search attributes do not decode
            described = (
                await self.client.workflow_service.describe_workflow_execution(request)
            ).workflow_execution_info
        except RPCError as gone:
            if gone.status == RPCStatusCode.NOT_FOUND:
                return []
            raise
        if described.status == WorkflowExecutionStatus.RUNNING.value:
            return []
        return await generations(self.client, run_id, described.execution.run_id)

    async def _delete_execution(self, run_id: str, execution: str) -> None:
        request = DeleteWorkflowExecutionRequest(
            namespace=self.client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=run_id, run_id=execution),
        )
        try:
            await self.client.workflow_service.delete_workflow_execution(request)
        except RPCError as err:
            if err.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.UNIMPLEMENTED):
                raise

    def _step(self, name: str, run_id: str) -> None:
        if self._fault is not None:
            self._fault(name, run_id)
