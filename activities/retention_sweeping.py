"""Retention: scheduling an ended run's data and trail for removal, and removing what is due.

When a run ends, its trail's export writes a marker ``retention/ended/{due}/{run}.json`` (due =
now + the ``ended`` period) naming where its objects live, and when its trail is due. A sweep
(`engine/retention_sweep.py`, on a Temporal Schedule) takes the markers due, oldest first:

1. counts the run's objects and writes the count into the marker (once: a retry reads it back);
2. deletes the objects and the run's Temporal executions;
3. writes the trail's marker ``retention/trails/{due}/{run}.json`` (if a trail period applies);
4. deletes the ended marker: only now is the run counted, with the count from step 1.

A sweep killed anywhere in between takes the same marker again and counts it once. Keys sort by
due time (``YYYYmmddTHHMM``), so a sweep reads only as far as what is due.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.audit_log import audit_key
from dsmo.activities.retention_markers import ENDED_PREFIX, SWEEPS_PREFIX, TRAILS_PREFIX, due_key, run_prefixes
from dsmo.workflows.contracts.retention_io import RECORD_SWEEP, SWEEP_RETENTION, SweepBatch, SweepCounts, SweepOutcome


class RetentionActivities:
    """The sweep's activities over one store and one Temporal client."""

    def __init__(self, store: ArtifactStore, client: Client, *, fault: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.client = client
        self._fault = fault  # tests: called between steps, may raise (a worker killed there)

    @activity.defn(name=SWEEP_RETENTION)
    async def sweep_retention(self, batch: SweepBatch) -> SweepCounts:
        """Remove up to ``batch.limit`` ended runs' data due by ``batch.as_of``, then trails."""
        counts = SweepCounts()
        for key in self._due(ENDED_PREFIX, batch.as_of, batch.limit):
            counts = counts.plus(await self._remove_run(key))
        room = batch.limit - counts.runs
        trails = self._due(TRAILS_PREFIX, batch.as_of, room) if room > 0 else []
        for key in trails:
            counts = counts.plus(self._remove_trail(key))
        counts.more = counts.runs + counts.trails >= batch.limit
        return counts

    @activity.defn(name=RECORD_SWEEP)
    def record_sweep(self, outcome: SweepOutcome) -> str:
        """Keep the sweep's outcome: ``retention/sweeps/{as_of}-{sweep id}.json`` (write-once)."""
        key = f"{SWEEPS_PREFIX}{outcome.as_of.astimezone(UTC):%Y%m%dT%H%M%S}-{outcome.sweep_id}.json"
        return self.store.put_json_once(key, outcome.model_dump(mode="json")).uri

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

    async def _remove_run(self, key: str) -> SweepCounts:
        marker = self._marker(key)
        if marker is None:
            return SweepCounts()  # another sweep finished it
        run_id = str(marker["runId"])
        keys = [
            self.store.key_of(uri)[1]
            for p in run_prefixes(run_id, marker["versions"])
            for uri in self.store.list_uris(p)
        ]
        if "objects" not in marker:
            marker["objects"] = len(keys)
            self.store.s3.put_object(Bucket=self.store.bucket, Key=key, Body=json.dumps(marker).encode())
        self._step("counted")
        self.store.delete_keys(keys)
        self._step("objects deleted")
        histories = await self._delete_history(run_id)
        if marker.get("trailDue"):
            trail_due = datetime.fromisoformat(str(marker["trailDue"]))
            self.store.put_if_absent(due_key(TRAILS_PREFIX, trail_due, run_id), json.dumps({"runId": run_id}).encode())
        self.store.delete_keys([key])
        return SweepCounts(runs=1, objects=int(marker["objects"]), histories=histories)

    def _remove_trail(self, key: str) -> SweepCounts:
        marker = self._marker(key)
        if marker is None:
            return SweepCounts()
        run_id = str(marker["runId"])
        segments = [self.store.key_of(uri)[1] for uri in self.store.list_uris(f"audit/{run_id}/")]
        self.store.delete_keys([audit_key(run_id), *segments])
        self.store.delete_keys([key])
        return SweepCounts(trails=1)

    def _marker(self, key: str) -> dict[str, Any] | None:
        body = self.store.stored_or_none(key)
        return None if body is None else dict(json.loads(body))

    async def _delete_history(self, run_id: str) -> int:
        """Delete every execution of the run (each continue-as-new generation); how many there were."""
        try:
            executions = [e.run_id async for e in self.client.list_workflows(f"WorkflowId='{run_id}'")]
        except RPCError as err:
            if err.status != RPCStatusCode.UNIMPLEMENTED:
                raise
            executions = [""]  # a server without visibility (the time-skipping one): the current one
        deleted = 0
        for execution in executions:
            request = DeleteWorkflowExecutionRequest(
                namespace=self.client.namespace,
                workflow_execution=WorkflowExecution(workflow_id=run_id, run_id=execution),
            )
            try:
                await self.client.workflow_service.delete_workflow_execution(request)
            except RPCError as err:
                if err.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.UNIMPLEMENTED):
                    raise
                continue
            deleted += 1
        return deleted

    def _step(self, name: str) -> None:
        if self._fault is not None:
            self._fault(name)
