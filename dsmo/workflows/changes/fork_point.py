"""Where a fork stops re-executing its original's record and runs live.

A fork (`dsmo runs fork RUN --from NODE`) is a new run that replays its original up to NODE:
earlier stages reuse their committed outputs, waits take the recorded events, saga actions take
their recorded outcomes, nothing is sent to anyone. At the boundary before NODE it goes live:
the corrections are set, and from NODE on agents run, messages are sent and waits wait for
people. The saga steps it replayed were done by the original and stay the original's to undo, so
the fork does not carry them (recorded). With a target version, the fork also moves to it there,
checked as any move is. Without one, a fork of a run that moved to another version after NODE
goes live on the version its original is on now: the moves still ahead in the record are made
there as one (their node maps and values set, in order).
"""

from __future__ import annotations

from temporalio import workflow

from dsmo.workflows.changes import run_migration
from dsmo.workflows.common import patches
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.migration_io import MigrationRequest
from dsmo.workflows.contracts.replay_plan import ReplayPlan
from dsmo.workflows.definition.migration_checks import MigrationRefused
from dsmo.workflows.definition.sensitive import masked_variables
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import RunEnded

# workflow.patched id: a fork from before its original's move goes live on the version the
# original is on now; forks from before this change went live on the version the record was at.
FORK_ON_VERSION_NOW_PATCH = "fork-live-on-the-version-now"


def due(run: Run, node_id: str) -> bool:
    """Whether this run is a fork reaching the node it goes live at."""
    plan = run.replay
    return plan is not None and plan.live_from == node_id


def go_live(run: Run, node_id: str) -> None:
    """Leave the record at ``node_id``: set the corrections, drop the original's saga steps, go live.

    Raises:
        RunEnded: The fork was asked to move to a version it cannot move to at ``node_id``.
    """
    plan = run.replay
    assert plan is not None
    state = run.state
    onward = plan.fork_to
    if onward is None and plan.moves and patches.patched(FORK_ON_VERSION_NOW_PATCH):
        onward = _to_version_now(plan, node_id)
    state.variables.update(plan.corrections)
    dropped = [entry.node for entry in run.saga]
    run.saga.clear()
    run.request = run.request.model_copy(update={"replay": None})
    state.audit.record(
        "RUN_FORKED",
        at=workflow.now(),
        stage=node_id,
        data={
            "forkOf": plan.of,
            "fromNode": node_id,
            "set": masked_variables(plan.corrections, run.definition.sensitive or (), run.fingerprint_key),
            "sagaStepsLeftToOriginal": dropped,
            **({"toVersion": onward.definition.version} if onward else {}),
        },
    )
    workflow.logger.info("Fork %s of %s goes live at %s", state.run_id, plan.of, node_id)
    if onward is not None:
        try:
            run_migration.move_now(run, onward, node_id)
        except MigrationRefused as err:
            raise RunEnded(
                RunStatus.FAILED, node_id, f"the fork cannot move to version {onward.definition.version}: {err}"
            ) from None


def _to_version_now(plan: ReplayPlan, node_id: str) -> MigrationRequest:
    """The moves the original made after the fork's node, as one move at it (to the last one's version)."""
    name, values = node_id, {}
    for move in plan.moves:
        name = move.request.node_map.get(name, name)
        values.update(move.request.set)
    last = plan.moves[-1].request.definition
    return MigrationRequest(
        definition=last,
        node_map={node_id: name} if name != node_id else {},
        set=values,
        requested_by="dsmo (fork)",
        reason=f"fork of {plan.of}: live on version {last.version}, which its original is on now",
    )
