"""What an `invoke` step's STAGE_SUCCEEDED records of its action's output: the output itself, or,
in a run about a data subject, a sealed copy by reference (the trail outlives an erasure).

The action has already happened when its output is recorded: a cancel that lands while the sealed
copy is written is let through only once the step is recorded (the step is on the saga stack
before, so the cancel's unwinding undoes it).
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from dsmo.workflows.common import patches
from dsmo.workflows.common.cancel_shield import through_cancel
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.trail_io import EventValues, canonical_values, values_digest
from dsmo.workflows.run.activity_calls import ActivityFailed
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.service_budgets import call_service

# workflow.patched id: a run about a data subject records its actions' outputs sealed, by reference.
SEALED_OUTPUT_PATCH = "sealed-action-output"


async def recorded_output(run: Run, output: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """What STAGE_SUCCEEDED records of an action's output: ``output`` itself, or, in a run about a
    data subject, ``outputRef`` (the output stored sealed with the subject's key, with its size and
    hash), since the trail outlives an erasure. A replay reads it back with
    ``starter.client.recorded_outputs.action_output``.

    If the sealed copy cannot be written, only ``outputDigest`` is kept (the run goes on; such a
    step cannot be replayed). Runs that recorded actions' outputs in the clear before keep doing so.

    Returns:
        What to record, and whether the run was asked to cancel while the sealed copy was written
        (the caller records the step, then lets the cancel through).
    """
    if run.seal is None or not patches.patched(SEALED_OUTPUT_PATCH):
        return {"output": output}, False  # nothing awaited: the step is recorded in this activation
    return await through_cancel(_sealed_output(run, output))


async def _sealed_output(run: Run, output: dict[str, Any]) -> dict[str, Any]:
    state, digest, size = run.state, values_digest(output), len(canonical_values(output))
    # The STAGE_SUCCEEDED about to be recorded: the object's name stays unique in the run.
    seq = state.audit.head.seq + len(state.audit.events) + 1
    try:
        uri = await call_service(
            contracts.STORE_EVENT_VALUES,
            EventValues(run_id=state.run_id, seq=seq, values=output, sha256=digest, seal=run.seal),
            result_type=str,
            local=True,
        )
    except ActivityFailed as failed:
        workflow.logger.warning("action output of %s not kept: %s", state.run_id, failed.message)
        return {"outputDigest": {"bytes": size, "sha256": digest}}
    return {"outputRef": {"uri": uri, "bytes": size, "sha256": digest}}
