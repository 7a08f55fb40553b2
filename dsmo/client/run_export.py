"""Exporting a run (and, if asked, its children) as one archive a third party can check offline.

What goes in and how it is checked is `run_archive`'s; this module gathers it: the trail, the
Temporal history, the definition snapshots, every stored object of the run still readable, and
the erasure records that touch it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.service import RPCError, RPCStatusCode

from dsmo.activities.artifacts import ArtifactErased, ArtifactMissing, ArtifactStore, run_input_key
from dsmo.activities.audit_log import chain, unchained
from dsmo.activities.definition_store import config_key
from dsmo.activities.erasure_log import ErasureLog
from dsmo.activities.retention_markers import run_prefixes
from dsmo.client import run_trails
from dsmo.client.archive_bindings import is_run_object, object_path
from dsmo.client.core import ClientCore
from dsmo.client.run_archive import ERASURES, ArchiveBuilder
from dsmo.client.trail_store import TrailStore
from dsmo.workflows.common.identifiers import check_run_id

MAX_RUNS = 1000  # a family this large is exported run by run, not as one archive


@dataclass(frozen=True)
class RunExport:
    """An exported run.

    Attributes:
        data: The zip archive.
        manifest_sha256: The SHA-256 of its manifest: record it elsewhere to pin this archive.
        runs: The runs it holds (the run first, then its children).
        unreadable: Objects the trail names that could not be included, and why (erased, missing).
    """

    data: bytes
    manifest_sha256: str
    runs: list[str]
    unreadable: dict[str, str] = field(default_factory=dict)


async def export_run(core: ClientCore, run_id: str, *, children: bool = False) -> RunExport:
    """Gather ``run_id`` (and its children, with ``children``) into one archive.

    Raises:
        DsmoError: The run exported no trail and does not answer (or does not exist).
    """
    check_run_id(run_id)
    store = core.artifacts
    builder = ArchiveBuilder([])
    fingerprints: set[str] = set()
    pending = [run_id]
    while pending and len(builder.run_ids) < MAX_RUNS:
        current = pending.pop(0)
        builder.run_ids.append(current)
        events = await _trail(core, builder, current)
        first = events[0].get("data", {}) if events else {}
        if isinstance(first.get("subject"), str):
            fingerprints.add(first["subject"])
        await _history(core, builder, current)
        await asyncio.to_thread(_objects, store, builder, current, events)
        if children:
            pending += [
                str(child)
                for event in events
                if (child := event.get("data", {}).get("childExecutionId")) and child not in builder.run_ids
            ]
    records = await asyncio.to_thread(ErasureLog(store).records)
    touching = [record for record in records if record.get("subject") in fingerprints]
    if touching:
        builder.add(ERASURES, "".join(_line(record) for record in touching).encode())
    data, manifest_sha256 = builder.zip_bytes(datetime.now(UTC).isoformat())
    return RunExport(data, manifest_sha256, list(builder.run_ids), dict(builder.unreadable))


async def _trail(core: ClientCore, builder: ArchiveBuilder, run_id: str) -> list[dict[str, Any]]:
    body = await asyncio.to_thread(TrailStore(core.artifacts).export, run_id)
    if body is None:  # not ended: its live trail, chained as the export will be
        body = chain([event.model_dump(mode="json") for event in await run_trails.events(core, run_id)])
    builder.add(f"runs/{run_id}/trail.jsonl", body)
    return unchained(body)


async def _history(core: ClientCore, builder: ArchiveBuilder, run_id: str) -> None:
    try:
        history = await core.temporal.get_workflow_handle(run_id).fetch_history()
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        builder.unreadable[f"temporal:{run_id}"] = "history deleted (erasure or retention)"
        return
    builder.add(f"runs/{run_id}/history.json", history.to_json().encode())


def _objects(store: ArtifactStore, builder: ArchiveBuilder, run_id: str, events: list[dict[str, Any]]) -> None:
    versions = sorted({str(event["workflowVersion"]) for event in events if event.get("workflowVersion")})
    for version in versions:
        snapshot = store.stored_or_none(config_key(version))
        if snapshot is not None:
            builder.add(f"runs/{run_id}/definitions/{version}.json", snapshot)
    named = {str(uri) for event in events for uri in event.get("artifactUris") or () if is_run_object(str(uri))}
    created = events[0] if events else {}
    if "inputSha256" in (created.get("data") or {}):
        # The trail vouches for the input: an archive without it must say why (removed, erased).
        named.add(store.uri(run_input_key(str(created["workflowVersion"]), run_id)))
    prefixes = run_prefixes(run_id, versions)
    listed = {uri for prefix in prefixes for uri in store.list_uris(prefix)}
    for uri in sorted(listed | named):
        try:
            builder.add(object_path(run_id, uri), store.read_bytes(uri))
        except ArtifactErased:
            builder.unreadable[uri] = "erased (its data subject was erased)"
        except ArtifactMissing:
            builder.unreadable[uri] = "missing (removed by retention, or never written)"


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
