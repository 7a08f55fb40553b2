"""Rewinding a run: sending a waiting run back to an earlier node of its path, with corrections.

The client reads the run's trail (its current line) and sends, with the `rewind` update, the
record the run re-executes up to the node to rebuild its variables there: the events its waits
took, the outcomes of its saga actions, its stages' committed outputs. The run checks the rest
itself (`workflows/changes/rewind_point.py`) and refuses, writing nothing, what it cannot do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError

from dsmo.activities.artifacts import ArtifactStore
from dsmo.client import moved_runs, replay, run_requests, run_status
from dsmo.client.client_errors import RewindNotAccepted
from dsmo.client.core import ClientCore
from dsmo.client.rpc_errors import update_failure
from dsmo.client.unanswered import closed_or_missing, update_run
from dsmo.workflows.contracts.rewind_io import REWIND_UPDATE, RewindAck, RewindRequest


async def rewind(
    core: ClientCore,
    store: ArtifactStore,
    run_id: str,
    to_node: str,
    *,
    reason: str,
    set_variables: Mapping[str, Any] | None = None,
    compensate: bool = True,
    by: str = "user",
) -> RewindAck:
    """Send ``run_id`` back to ``to_node``; what the run answered. Every refusal comes before any write."""
    run_requests.required_reason(reason, "the run goes back")
    view = await run_status.status(core, run_id)
    if view.status.terminal:
        raise RewindNotAccepted(
            f"run {run_id!r}: status: the run has ended ({view.status.value}); fork it instead (dsmo runs fork)"
        )
    planned = await replay.plan_replay(core, store, run_id, to_node, live=True, option="--to")
    plan = planned.request.replay
    assert plan is not None
    corrections = dict(set_variables or {})
    # A moved run re-executes its record on the version it is on now, its earlier part renamed by the moves.
    plan = moved_runs.on_version_now(plan, planned.events)
    request = RewindRequest(
        to_node=to_node,
        set=corrections,
        compensate=compensate,
        requested_by=by,
        reason=reason,
        plan=plan.model_copy(
            update={"live_from": to_node, "corrections": {**plan.corrections, **corrections}, "rewinding": True}
        ),
    )
    handle = core.temporal.get_workflow_handle(run_id)
    try:
        return await update_run(core.temporal, handle, REWIND_UPDATE, request, RewindAck)
    except WorkflowUpdateFailedError as err:
        raise RewindNotAccepted(f"run {run_id!r}: {update_failure(err)}") from None
    except RPCError as err:
        raise await closed_or_missing(core.settings, handle, err) from None
