"""Moving a run to another version of its definition: checked, handed over, recorded on arrival.

A `migrate` update asks for the move. Its validator refuses, writing nothing to the history,
whatever `migration_checks.py` refuses for where the run is now. The move itself is a
continue-as-new on the target version at the mapped node, carrying the run's checkpoint
(variables, stage outputs, saga stack, inbox, seen event ids, trail head, deadlines).

Where a run can move:
- waiting (for a reply, documents, a signature, a test, an event, a date): at once, from
  inside its wait, which it goes on with at the mapped node (its deadline kept, unless the
  timers restart);
- anywhere else (a stage or an agent call in flight, a child run it waits for, queued behind
  the agent's concurrency limit, a wait whose event has just arrived): at its next node
  boundary, or inside the wait it enters first. The update waits there, so the loop enters no
  node while a move is decided, and the checks run again where the run is; if it cannot move
  there, the update fails with the reason and the run goes on where it is.
Events that arrive once a move is accepted are kept, not applied, so exactly one version
takes each (the target's wait, from the inbox). Longer than most modules: the update's checks,
the wait for a place to move and the arrival are one protocol, read together.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from dsmo.workflows.changes.handover_size import handover_problem
from dsmo.workflows.common import patches
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.contracts.migration_io import (
    ALREADY_ON_TARGET,
    MIGRATION_REFUSED,
    MigrationAck,
    MigrationRecord,
    MigrationRequest,
)
from dsmo.workflows.contracts.run_records import ExecutionRequest, WaitCheckpoint
from dsmo.workflows.definition.migration_checks import (
    MOVES_AT_BOUNDARY,
    MigrationRefused,
    RunPosition,
    plan_migration,
    variables_after_move,
    wait_kind,
)
from dsmo.workflows.definition.node_types import RequestDocumentNode
from dsmo.workflows.definition.sensitive import masked_variables
from dsmo.workflows.run.context import PendingMigration, Run
from dsmo.workflows.run.decided_ending import past_a_cancel

# workflow.patched id: a `migrate` waiting for a boundary is also decided when the run enters a wait.
MOVE_INTO_WAIT_PATCH = "move-into-wait"
# workflow.patched id: a `migrate` whose handler begins after the run's last boundary is refused
# at once. Before, it waited for a boundary that never came. Asked only by such a late handler.
LATE_MOVE_PATCH = "move-asked-after-the-last-boundary"


def validate(run: Run, request: MigrationRequest) -> None:
    """The update's validator: refuse, before anything is written, a move the run cannot make.

    Raises:
        ApplicationError: ``MigrationRefused`` with the reason in one line, or
            ``MigrationAlreadyOnTarget`` when the run already follows the target version.
    """
    try:
        _check(run, request, position_now(run) or _between_nodes(run))
    except MigrationRefused as err:
        raise _refusal(err) from None


def refusal(run: Run, request: MigrationRequest) -> str | None:
    """Why the run would refuse ``request`` now, by the validator's checks (the hand-over's size
    among them), or None: the answer to a dry run's query, which writes nothing."""
    try:
        _check(run, request, position_now(run) or _between_nodes(run))
    except MigrationRefused as err:
        return str(err)
    return None


async def take(run: Run, request: MigrationRequest) -> MigrationAck:
    """The update's handler: decide the move where the run is, and have it carried out.

    Returns:
        Where the run goes on in the target version.

    Raises:
        ApplicationError: The run reached a node boundary that cannot move, or ended first.
    """
    if run.boundaries_over is not None and patches.patched(LATE_MOVE_PATCH):
        # Accepted, but its handler began once the run was ending (a cancel in the same task):
        # no boundary comes, and a handler left waiting would keep the run from ending.
        raise _refusal(MigrationRefused(f"status: {run.boundaries_over}"))
    position = position_now(run)
    if position is None:
        if run.migration_asked or run.migration is not None:
            raise _refusal(MigrationRefused("status: another move of this run is under way"))
        run.migration_asked = True
        # A node that sends, then waits, has no boundary before its wait: the move is made from inside it.
        into_wait = patches.patched(MOVE_INTO_WAIT_PATCH)
        try:
            await workflow.wait_condition(lambda: any((run.boundary, run.no_boundary, into_wait and position_now(run))))
        finally:
            run.migration_asked = False
        position = run.boundary or (position_now(run) if into_wait else None)
        if position is None:
            raise _refusal(MigrationRefused(f"status: {run.no_boundary}"))
    try:
        plan = _check(run, request, position)
    except MigrationRefused as err:
        raise _refusal(err) from None
    run.migration = PendingMigration(request, position, plan)
    run.continuing = True  # events from now on are kept for the target version's waits
    source, target = run.definition, request.definition
    return MigrationAck(
        run_id=run.state.run_id,
        from_version=source.version,
        to_version=target.version,
        from_workflow_version=source.workflow_version,
        to_workflow_version=target.workflow_version,
        from_node=position.node,
        to_node=plan.node,
        waiting=position.waiting_for is not None,
        expiring=list(plan.expiring),
    )


async def at_boundary(run: Run, node_id: str | None, wait: WaitCheckpoint | None = None) -> None:
    """Hold the run at a node boundary while a waiting `migrate` update decides (see the module doc)."""
    if not run.migration_asked:
        return
    run.boundary = _position(run, node_id, wait.kind if wait else None)
    await workflow.wait_condition(lambda: not run.migration_asked)
    run.boundary = None


async def no_more_boundaries(run: Run, reason: str) -> None:
    """The run is ending: a `migrate` update still waiting for a boundary is answered ``reason``,
    and one whose handler begins later is refused with it at once (`take`)."""
    run.boundaries_over = reason
    if run.migration_asked:
        run.no_boundary = reason
        await past_a_cancel(run, lambda: workflow.wait_condition(lambda: not run.migration_asked))


def position_now(run: Run) -> RunPosition | None:
    """Where a waiting run is, to move it from inside its wait; None when it moves at a boundary."""
    state = run.state
    waiting = state.waiting
    if waiting is None or state.resume_event is not None or waiting.kind in MOVES_AT_BOUNDARY:
        return None
    return _position(run, waiting.node, waiting.kind)


def _between_nodes(run: Run) -> RunPosition:
    # What the validator can check of a run that moves at its next boundary: the node it is at.
    return _position(run, run.state.current_node, None)


def move_now(run: Run, request: MigrationRequest, node_id: str) -> None:
    """Decide a move at the boundary before ``node_id`` on the run's own behalf (a fork moving to
    its target version); the loop carries it out at once.

    Raises:
        MigrationRefused: The move cannot be made there.
    """
    position = _position(run, node_id, None)
    run.migration = PendingMigration(request, position, _check(run, request, position))


def as_recorded(run: Run, node_id: str | None, wait: WaitCheckpoint | None) -> None:
    """Replay: move as the original did here; a move this replay cannot make is dropped (its path
    then diverges from the original's, which the replay's report shows)."""
    plan = run.replay
    assert plan is not None and plan.moves
    move = plan.moves[0]
    position = _position(run, node_id, wait.kind if wait else None)
    checked = RunPosition(position.node, position.waiting_for, position.kept, moved_variables(run, move.request))
    try:
        decided = plan_migration(
            run.definition, move.request.definition, checked, move.request.node_map, leave_wait=move.request.leave_wait
        )
    except MigrationRefused as err:
        workflow.logger.warning("Replay %s cannot move as its original did: %s", run.state.run_id, err)
        run.request = run.request.model_copy(update={"replay": plan.model_copy(update={"moves": plan.moves[1:]})})
        return
    run.migration = PendingMigration(move.request, position, decided)


def _position(run: Run, node_id: str | None, waiting_for: str | None) -> RunPosition:
    return RunPosition(
        node=node_id,
        waiting_for=waiting_for,
        kept=[entry.event for entry in run.state.inbox],
        variables=run.state.variables,
    )


def _check(run: Run, request: MigrationRequest, position: RunPosition) -> Any:
    state = run.state
    if run.replay is not None:
        raise MigrationRefused("status: a replay follows its original run's record; it does not move")
    if state.status.terminal:
        raise MigrationRefused(f"status: the run has ended ({state.status.value})")
    ending = state.ending_problem()
    if ending is not None:  # unwinding towards its end (endings.py)
        raise MigrationRefused(ending)
    if run.migration is not None:
        raise MigrationRefused("status: the run is already moving to another version")
    if run.rewind is not None:
        raise MigrationRefused(f"status: the run is going back to {run.rewind.request.to_node!r}")
    target = request.definition
    if target.agent == run.definition.agent and target.workflow_version == run.definition.workflow_version:
        raise MigrationRefused(f"already on {target.version} ({target.workflow_version})", already=True)
    if target.subject != run.definition.subject:
        # A run's data is sealed with the subject it started with; it cannot become another's.
        raise MigrationRefused(
            f"subject: the target names {target.subject!r}, the run {run.definition.subject!r}; "
            "a run keeps the data subject it started with"
        )
    position = RunPosition(
        node=position.node,
        waiting_for=position.waiting_for,
        kept=position.kept,
        variables=moved_variables(run, request),
    )
    planned = plan_migration(run.definition, target, position, request.node_map, leave_wait=request.leave_wait)
    too_large = handover_problem(run, target, position)
    if too_large is not None:
        raise MigrationRefused(too_large)
    return planned


def _refusal(err: MigrationRefused) -> ApplicationError:
    kind = ALREADY_ON_TARGET if err.already else MIGRATION_REFUSED
    return ApplicationError(str(err), type=kind, non_retryable=True)


def moved_variables(run: Run, request: MigrationRequest) -> dict[str, Any]:
    """The run's variables as the target version sees them (see `variables_after_move`)."""
    return variables_after_move(run.state.variables, request.node_map, request.set)


def hand_over(run: Run, node_id: str | None, wait: WaitCheckpoint | None) -> ExecutionRequest:
    """The next generation's request: the target version, at the mapped node, with the run's state."""
    pending = run.migration
    assert pending is not None
    request, plan, target = pending.request, pending.plan, pending.request.definition
    mapped = plan.node if plan.node is not None else node_id
    kept_wait = _moved_wait(wait, mapped, request, target.nodes.get(mapped or "")) if mapped else None
    record = MigrationRecord(
        from_version=run.definition.version,
        from_workflow_version=run.definition.workflow_version,
        from_node=pending.position.node,
        to_node=mapped,
        waiting=pending.position.waiting_for is not None,
        node_map=dict(plan.node_map),
        set=masked_variables(request.set, target.sensitive or (), run.fingerprint_key),
        left_wait=wait is not None and kept_wait is None,
        restart_timers=request.restart_timers,
        requested_by=request.requested_by,
        reason=request.reason,
    )
    # Going back across a move is not supported: the nodes entered before it are not offered.
    checkpoint = run.to_checkpoint(mapped, kept_wait).model_copy(
        update={"variables": moved_variables(run, request), "migration": record, "first_entries": {}}
    )
    update: dict[str, Any] = {"definition": target, "checkpoint": checkpoint}
    replay = run.replay
    if replay is not None:  # the rest of the original's record, from where this replay is in it
        update["replay"] = replay.model_copy(
            update={
                "resumes": replay.resumes[run.resumes_replayed :],
                "actions": replay.actions[run.actions_replayed :],
                "moves": replay.moves[1:],
            }
        )
    return run.request.model_copy(update=update)


def _moved_wait(
    wait: WaitCheckpoint | None, mapped: str, request: MigrationRequest, node: Any
) -> WaitCheckpoint | None:
    if wait is None or node is None:
        return None
    if wait_kind(node) != wait.kind:
        return None  # leaving the wait (the checks refused this unless asked): the node runs afresh
    update: dict[str, Any] = {"node": mapped}
    if request.restart_timers:
        update.update(until=None, attempt=1)  # the node computes its deadline afresh
    if isinstance(node, RequestDocumentNode):
        update["requested"] = list(node.parameters.documents)  # what the target asks for
    return wait.model_copy(update=update)


def arrive(run: Run) -> None:
    """The first thing a moved run's new generation does: record the move and publish its version."""
    checkpoint = run.request.checkpoint
    assert checkpoint is not None and checkpoint.migration is not None
    record, state, definition = checkpoint.migration, run.state, run.definition
    state.audit.record(
        "RUN_MIGRATED",
        at=workflow.now(),
        stage=record.to_node,
        data={
            "fromVersion": record.from_version,
            "toVersion": definition.version,
            "fromWorkflowVersion": record.from_workflow_version,
            "toWorkflowVersion": definition.workflow_version,
            "fromNode": record.from_node,
            "toNode": record.to_node,
            "waiting": record.waiting,
            "nodeMap": record.node_map,
            "set": record.set,
            "leftWait": record.left_wait,
            "restartTimers": record.restart_timers,
            "requestedBy": record.requested_by,
            "reason": record.reason,
            "generation": checkpoint.generation,
        },
    )
    workflow.upsert_search_attributes([sa.WORKFLOW_VERSION.value_set(definition.workflow_version)])
