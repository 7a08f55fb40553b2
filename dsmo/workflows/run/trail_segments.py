"""A run's age costs nothing: its trail goes to the store in segments, large event data by reference.

Without this a run carried its whole audit trail, with every event's variables, into each
continue-as-new input, and a chat loop with long messages outgrew Temporal's 2 MB limit after
some dozens of replies. Now:

- at each continue-as-new the generation's events are written once to
  `audit/{run_id}/segments/{n}.jsonl`, hash-chained from the previous segment's last hash, and
  the next generation carries only the head (`TrailHead`);
- a generation also continues as new once its trail holds `TAIL_BYTES_MAX` (not only when its
  history is long), so a segment, and the trail a checkpoint carries, stay bounded;
- variables an event sets that are larger than `INLINE_VALUES_MAX` are written to
  `events/{run_id}/{seq}-{sha256 prefix}.json` and RUN_RESUMED records their reference, size and hash.

The exporter, `dsmo events`, the console and `dsmo audit verify` read the segments plus the tail.
Runs that started before this carried their trail as before; `TRAIL_SEGMENTS_PATCH` is asked
only where the two differ, so their histories replay as they ran.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from dsmo.workflows.common import patches
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.trail_io import AuditSegment, EventValues, TrailHead, canonical_values, values_digest
from dsmo.workflows.run.activity_calls import ActivityFailed
from dsmo.workflows.run.audit import TAIL_BYTES_MAX
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.service_budgets import BUDGETS, call_service, record_service_failure

TRAIL_SEGMENTS_PATCH = "trail-segments"
# Event variables larger than this (as JSON) are recorded by reference instead of inline.
INLINE_VALUES_MAX = 4 * 1024


def segments_on(run: Run) -> bool:
    """Whether this run writes its trail in segments (asked once, when it first matters)."""
    if run.trail_segments is None:
        run.trail_segments = patches.patched(TRAIL_SEGMENTS_PATCH)
    return run.trail_segments


def note_tail(run: Run) -> None:
    """After each record: once the tail is large, decide whether it may continue as new for it."""
    if run.trail_segments is None and run.state.audit.fresh_bytes >= TAIL_BYTES_MAX:
        segments_on(run)


async def write_segment(run: Run) -> None:
    """Write the tail to the store as the trail's next segment and keep only the head."""
    state = run.state
    trail = state.audit
    if not trail.events or not segments_on(run):
        return
    segment = AuditSegment(
        run_id=state.run_id,
        number=trail.head.segments + 1,
        previous_hash=trail.head.hash,
        events=[event.model_dump(mode="json") for event in trail.events],
    )
    run.continuing = True  # an event arriving meanwhile is kept for the next generation's wait
    try:
        # Local: the segment is not copied into the history (only the head that comes back is).
        head = await call_service(contracts.WRITE_AUDIT_SEGMENT, segment, result_type=TrailHead, local=True)
    except ActivityFailed as failed:
        # The events stay in the tail and travel in the checkpoint; the next generation tries
        # again when it has recorded another TAIL_BYTES_MAX of its own (not at once: no loop).
        record_service_failure(state, BUDGETS[contracts.WRITE_AUDIT_SEGMENT], failed.error, stage=state.current_node)
        workflow.logger.warning("audit segment not written for %s: %s", state.run_id, failed.message)
        return
    trail.advance(head)


async def recorded_values(run: Run, values: dict[str, Any]) -> dict[str, Any]:
    """What RUN_RESUMED records of the variables an event set: the values, or a reference to them."""
    size = len(canonical_values(values))
    if size <= INLINE_VALUES_MAX or not segments_on(run):
        return {"set": values}
    digest = values_digest(values)
    state = run.state
    # The RUN_RESUMED about to be recorded (a signal recorded while the object is written may
    # take this number first: the name stays unique in the run, which is all it needs to be).
    seq = state.audit.head.seq + len(state.audit.events) + 1
    try:
        uri = await call_service(
            contracts.STORE_EVENT_VALUES,
            EventValues(run_id=state.run_id, seq=seq, values=values, sha256=digest, seal=run.seal),
            result_type=str,
            local=True,
        )
    except ActivityFailed as failed:
        if run.seal is not None:
            # A run about a data subject keeps nothing of its data in the clear: the trail keeps
            # the values' digest and names, the run its variables (only such runs get here).
            workflow.logger.warning("event values of %s not kept: %s", state.run_id, failed.message)
            return {"setDigest": {"bytes": size, "sha256": digest}, "setKeys": sorted(values)}
        workflow.logger.warning("event values of %s kept inline: %s", state.run_id, failed.message)
        return {"set": values}
    return {
        "setRef": {"uri": uri, "bytes": size, "sha256": digest},
        "setKeys": sorted(values),
    }
