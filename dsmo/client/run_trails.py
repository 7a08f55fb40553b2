"""One run's audit trail: from the run while it runs, from the trail it exported once it ended,
and the check of that export (its hash chain, and its content against the run's own record)."""

from __future__ import annotations

import asyncio
import dataclasses

from dsmo.client.core import ClientCore
from dsmo.client.trail_store import TrailVerification, cut_short, erased_artifacts, verify_export
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.run_records import AuditEvent, TrailView
from dsmo.workflows.contracts.trail_io import TrailHead


async def events(core: ClientCore, run_id: str, *, live: bool = False) -> list[AuditEvent]:
    """The run's audit trail so far: from the run, or from its exported trail once it has ended.

    `RunHandle.events` documents it.
    """
    if not live and (exported := await exported_events(core, run_id)) is not None:
        return exported
    view = await trail(core, run_id)
    if not view.head.segments:
        return view.events
    earlier = await asyncio.to_thread(core.trail_store().segment_events, run_id, view.head.segments)
    return earlier + view.events


async def trail(core: ClientCore, run_id: str) -> TrailView:
    """Where the run's trail segments in the store end (by Temporal's own record), and the events after.

    `RunHandle.trail` documents it.
    """
    try:
        view: TrailView = await core.query(run_id, "trail", TrailView)
    except DsmoError as err:
        if "unknown queryType" not in str(err):
            raise
        # A worker from before trail segments: its runs carry the whole trail.
        return TrailView(head=TrailHead(), events=await core.query(run_id, "events", list[AuditEvent]))
    return view


async def exported_events(core: ClientCore, run_id: str) -> list[AuditEvent] | None:
    """The trail an ended run exported (`audit/{run_id}.jsonl`), or None if it has not ended or has none.

    A run Temporal no longer has (erased, or past the namespace's retention) is read from its
    export too: only an ended run exports one.
    """
    if not await core.has_ended(run_id):
        return None
    return await asyncio.to_thread(core.trail_store().exported_events, run_id)


async def verify_trail(core: ClientCore, run_id: str) -> TrailVerification:
    """Check an ended run's exported trail: its hash chain and, if the run still answers, its content.

    `RunHandle.verify_trail` documents it.
    """
    trails = core.trail_store()
    body = await asyncio.to_thread(trails.export, run_id)
    if body is None:
        why = await asyncio.to_thread(trails.missing_export, run_id)
        raise DsmoError(f"no exported audit trail for {run_id!r} ({why})")
    head: TrailHead | None
    try:
        # The run's own record, from Temporal (needs a worker), not the file being verified.
        head = (await trail(core, run_id)).head
        own: list[AuditEvent] | None = await events(core, run_id, live=True)
    except DsmoError:
        # The run itself is gone (retention, erasure): the chain is checked against its write-once
        # segments in the store, which the export must begin with.
        head, own = await asyncio.to_thread(trails.stored_head, run_id), None
    verified = verify_export(body, own, head)
    if verified.ok and cut_short(body):
        return dataclasses.replace(verified, ok=False, problem="the trail ends before the run's ending (cut short)")
    if not verified.ok:
        return verified
    erased, record = await asyncio.to_thread(erased_artifacts, trails.store, body)
    return dataclasses.replace(verified, erased=erased, erasure=record)
