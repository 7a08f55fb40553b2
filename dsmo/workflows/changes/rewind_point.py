"""Sending a waiting run back to an earlier node (a rewind): checked, undone, handed over, rebuilt.

A `rewind` update asks for it. Its validator refuses, writing nothing to the history, a node
the run has not reached on its current line, a run that is not waiting (one that ended is
forked instead), and corrections no node from there on reads.

The update's handler records `RUN_REWOUND`, then undoes (LIFO, as a failure would) the saga
steps done since the run first entered the node, unless asked not to. The run then continues
as new: the next generation starts at the run's first node and re-executes its own record up
to the node (`ReplayPlan.rewinding`), the way a fork does, recording nothing again, to rebuild
its variables as they were there. Stage outputs, consumed events and the trail after that
point stay where they are; they are no longer the run's current ones. At the node the run
takes up the counters it carried (its step, visit counts and committed stage keys only grow,
so a stage it enters again commits a new output) and the saga steps it kept, applies the
corrections, and goes on live.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.rewind_io import REWIND_REFUSED, RewindAck, RewindRecord, RewindRequest
from dsmo.workflows.contracts.run_records import Compensation, ExecutionRequest
from dsmo.workflows.definition.corrections import correction_problem
from dsmo.workflows.definition.migration_checks import MOVES_AT_BOUNDARY
from dsmo.workflows.definition.sensitive import masked_variables
from dsmo.workflows.run.context import PendingRewind, Run
from dsmo.workflows.saga.compensation_stack import unwind_above

# workflow.patched id: a run that took a rewind (the marker makes a worker without it fail
# clearly on this history instead of replaying it another way).
REWIND_PATCH = "rewind"
# How many of the path's latest nodes a refusal shows.
PATH_SHOWN = 12


def validate(run: Run, request: RewindRequest) -> None:
    """The update's validator: refuse, before anything is written, a rewind the run cannot take.

    Raises:
        ApplicationError: ``RewindRefused``, with the reason in one line.
    """
    problem = refusal(run, request)
    if problem is not None:
        raise ApplicationError(problem, type=REWIND_REFUSED, non_retryable=True)


def refusal(run: Run, request: RewindRequest) -> str | None:
    """Why the run cannot go back to ``request.to_node`` now; None when it can."""
    state, node, definition = run.state, request.to_node, run.definition
    status = state.status
    if run.replay is not None:
        return "status: a replay follows its original run's record; it is not rewound"
    if status.terminal:
        return f"status: the run has ended ({status.value}); fork it instead (dsmo runs fork)"
    ending = state.ending_problem()
    if ending is not None:  # unwinding towards its end: it says WAITING no more (endings.py)
        return f"{ending}; fork it once it has ended (dsmo runs fork)"
    if run.rewind is not None:
        return f"status: the run is already going back to {run.rewind.request.to_node!r}"
    if run.migration is not None or run.migration_asked:
        return "status: the run is moving to another version"
    if status not in (RunStatus.WAITING, RunStatus.PENDING) or state.resume_event is not None:
        where = f" at {state.current_node!r}" if state.current_node else ""
        return f"status: the run is {status.value}{where}; a run goes back only while it waits"
    waiting = state.waiting
    if waiting is not None and waiting.kind in MOVES_AT_BOUNDARY:
        return f"status: the run waits for its child run at {waiting.node!r}; rewind it once the child has ended"
    if node not in definition.nodes:
        return f"to: {node!r} is not a node of {definition.agent} ({', '.join(definition.nodes)})"
    if node not in run.first_entries:
        if node in state.path:
            return (
                f"to: the run entered {node!r} before it kept where it can go back to "
                "(it started on an older DSMO, or moved to another version since); fork it instead"
            )
        shown = state.path[-PATH_SHOWN:]
        path = " -> ".join(shown) if len(shown) == len(state.path) else "... -> " + " -> ".join(shown)
        return f"to: the run has not reached {node!r} (its path: {path or 'empty'})"
    plan = request.plan
    if plan.of != state.run_id or not plan.rewinding or plan.live_from != node:
        return f"plan: the record sent is not this run's up to {node!r} (build it with DsmoClient.rewind)"
    if plan.moves:
        return "to: the run moved to another version; going back across a move is not supported (fork it instead)"
    for name in request.set:
        problem = correction_problem(definition, node, name)
        if problem is not None:
            return f"set: {problem}"
    return None


async def take(run: Run, request: RewindRequest) -> RewindAck:
    """The update's handler: record the rewind, undo the later saga steps, have the run go back."""
    workflow.patched(REWIND_PATCH)
    state = run.state
    entry = run.first_entries[request.to_node]
    later = run.saga[entry.saga_depth :]
    run.rewind = PendingRewind(request, state.current_node)
    run.continuing = True  # events from now on are kept for the waits from the node on
    state.audit.record(
        "RUN_REWOUND",
        at=workflow.now(),
        stage=request.to_node,
        data={
            "fromNode": state.current_node,
            "toNode": request.to_node,
            "set": masked_variables(request.set, run.definition.sensitive or (), run.fingerprint_key),
            "compensate": request.compensate,
            "sagaSteps": [step.node for step in later],
            "cutFrom": entry.seq,  # the trail from here to this event is no longer the run's current line
            "requestedBy": request.requested_by,
            "reason": request.reason,
        },
    )
    ack = RewindAck(run_id=state.run_id, from_node=state.current_node, to_node=request.to_node)
    if not request.compensate:
        del run.saga[entry.saga_depth :]
        return ack.model_copy(update={"left": [step.node for step in later]})
    undone = await unwind_above(run, entry.saga_depth, "rewind")
    if undone is None:
        return ack
    return ack.model_copy(
        update={
            "compensated": list(undone["compensated"]),
            "compensation_failed": [failure["node"] for failure in undone["failed"]],
        }
    )


def hand_over(run: Run) -> ExecutionRequest:
    """The next generation's request: from the run's first node, re-executing its record up to the node."""
    pending = run.rewind
    assert pending is not None
    request = pending.request
    entry = run.first_entries[request.to_node]
    # The nodes first entered after it are entered anew (their entries noted again then).
    run.first_entries = {node: seen for node, seen in run.first_entries.items() if seen.step < entry.step}
    first = run.request.start_at or run.definition.start
    variables: dict[str, Any] = {**run.request.input, "stages": {}}
    checkpoint = run.to_checkpoint(first, None).model_copy(
        update={
            "variables": variables,
            "path": [],
            "rewind": RewindRecord(from_node=pending.from_node, to_node=request.to_node),
        }
    )
    # The plan's own corrections come first: what a moved run's moves set (dsmo/client/moved_runs.py).
    plan = request.plan.model_copy(
        update={
            "live_from": request.to_node,
            "corrections": {**request.plan.corrections, **request.set},
            "rewinding": True,
        }
    )
    return run.request.model_copy(update={"checkpoint": checkpoint, "replay": plan})


def arrive(run: Run) -> None:
    """The first thing a rewound run's next generation does: keep its counters aside, then
    re-execute its record from its first node, recording nothing again."""
    checkpoint = run.request.checkpoint
    assert checkpoint is not None and checkpoint.rewind is not None
    state = run.state
    state.audit.record(
        "RUN_CONTINUED",
        at=workflow.now(),
        stage=checkpoint.node,
        data={"generation": checkpoint.generation, "rewoundTo": checkpoint.rewind.to_node},
    )
    run.rewound_from = checkpoint
    run.step, run.visits, run.committed, run.saga, run.first_entries = 0, {}, {}, [], {}
    run.routed_to_fail_safe = False
    state.audit.muted = True


def due(run: Run, node_id: str) -> bool:
    """Whether this run, going back, has reached the node it goes back to."""
    plan = run.replay
    return run.rewound_from is not None and plan is not None and plan.live_from == node_id


def go_live(run: Run, node_id: str) -> None:
    """Back at ``node_id``: take up the carried counters and saga, apply the corrections, go on live."""
    plan = run.replay
    assert plan is not None
    _take_up(run)
    run.state.variables.update(plan.corrections)
    workflow.logger.info("Execution %s is back at %s", run.state.run_id, node_id)


def abandon(run: Run) -> None:
    """The run ends while going back: it ends as the run it was (its saga steps, its trail)."""
    if run.rewound_from is not None:
        _take_up(run)


def _take_up(run: Run) -> None:
    carried = run.rewound_from
    assert carried is not None
    run.step = carried.step
    run.visits = dict(carried.visits)
    run.committed = dict.fromkeys(carried.committed)
    run.saga = [Compensation.model_validate(entry) for entry in carried.saga]
    run.first_entries = dict(carried.first_entries)
    run.request = run.request.model_copy(update={"replay": None})
    run.rewound_from = None
    run.state.audit.muted = False
