"""A migration's dry run: what a move would do to a run, asked of the run, with nothing moved.

A dry run cannot ask the run's `migrate` validator without the risk of a move, so it asks the
run where it is (its status and variables) and runs the same checks here
(`migration_checks.plan_migration`), then asks the run the checks only it can make (what the
hand-over would carry, a move or rewind under way) through its ``migrate_check`` query, which
writes nothing. The answer is the run's, unless the run moves on before the real move is sent.
"""

from __future__ import annotations

from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError

from dsmo.client import definitions_client, run_status, run_trails
from dsmo.client.client_errors import AlreadyOnTarget, MigrationNotAccepted, RunClosed
from dsmo.client.core import ClientCore
from dsmo.client.unanswered import QUERY_TIMEOUT, closed_or_missing
from dsmo.workflows.contracts.migration_io import MIGRATE_CHECK_QUERY, MigrationAck, MigrationRequest
from dsmo.workflows.definition.migration_checks import (
    MOVES_AT_BOUNDARY,
    MigrationRefused,
    RunPosition,
    plan_migration,
    variables_after_move,
    wait_kind,
)
from dsmo.workflows.definition.waits_ahead import waits_ahead
from dsmo.workflows.events.resume_events import ResumeEvent


async def preview(core: ClientCore, run_id: str, request: MigrationRequest) -> MigrationAck:
    """What the move would do, by the run's own checks, without asking the run to move (a dry run).

    Raises:
        AlreadyOnTarget: The run follows the target version already.
        MigrationNotAccepted: The checks refuse the move (the reason, in one line).
        RunClosed: The run has ended.
    """
    view = await run_status.status(core, run_id)
    target = request.definition
    if view.status.terminal:
        raise RunClosed(f"run {run_id!r} has already ended ({view.status}); nothing to move")
    if view.workflow_version == target.workflow_version:
        raise AlreadyOnTarget(f"run {run_id!r}: already on {target.version} ({target.workflow_version})")
    source = await definitions_client.definition(core, view.agent, view.workflow_version)
    variables = variables_after_move(await run_status.variables(core, run_id), request.node_map, request.set)
    in_wait = view.waiting_for is not None and view.waiting_for not in MOVES_AT_BOUNDARY
    kept = await kept_events(core, run_id) if view.inbox is not None else []
    position = RunPosition(
        node=view.current_node,
        waiting_for=view.waiting_for if in_wait else None,
        kept=[event for event in kept if event.type != "DOCUMENT_UPLOADED"],
        variables=variables,
    )
    try:
        plan = plan_migration(source, target, position, request.node_map, leave_wait=request.leave_wait)
    except MigrationRefused as err:
        raise MigrationNotAccepted(f"run {run_id!r}: {err}") from None
    refused = await _refusal_now(core, run_id, request)
    if refused is not None:
        raise MigrationNotAccepted(f"run {run_id!r}: {refused}")
    # The trail does not say which document an early upload carries: it expires only when no
    # document wait lies ahead at all (the run itself also matches the document's name).
    ahead = waits_ahead(target, plan.node, include_current=True, fail_safe=True)
    takes_documents = any(wait_kind(wait) == "document" for wait in ahead)
    expiring = [
        event.event_id
        for event in kept
        if event.event_id in plan.expiring or (event.type == "DOCUMENT_UPLOADED" and not takes_documents)
    ]
    return MigrationAck(
        run_id=run_id,
        from_version=source.version,
        to_version=target.version,
        from_workflow_version=source.workflow_version,
        to_workflow_version=target.workflow_version,
        from_node=view.current_node,
        to_node=plan.node,
        waiting=in_wait,
        expiring=expiring,
    )


async def _refusal_now(core: ClientCore, run_id: str, request: MigrationRequest) -> str | None:
    """What the run itself says of the move now (the checks only it can make: what the hand-over
    would carry, whether another move or a rewind is under way), or None; a worker from before
    the question answers nothing, and the dry run goes by its own checks."""
    try:
        answer = await core.temporal.get_workflow_handle(run_id).query(
            MIGRATE_CHECK_QUERY, request, rpc_timeout=QUERY_TIMEOUT
        )
    except WorkflowQueryFailedError:
        return None  # a worker that does not know the query
    except RPCError as err:
        raise await closed_or_missing(core.settings, core.handle(run_id), err) from None
    return answer if isinstance(answer, str) else None


async def kept_events(core: ClientCore, run_id: str) -> list[ResumeEvent]:
    """The events ``run_id`` keeps in its inbox, oldest first, from its trail.

    Each ``EVENT_BUFFERED`` record not yet followed by its ``EVENT_CONSUMED`` or ``EVENT_EXPIRED``;
    the trail names each event's type and id, not its data.
    """
    kept: dict[str, str] = {}
    for record in await run_trails.events(core, run_id):
        event_id = record.data.get("eventId")
        if not isinstance(event_id, str):
            continue
        if record.type == "EVENT_BUFFERED":
            kept[event_id] = str(record.data.get("eventType", ""))
        elif record.type in ("EVENT_CONSUMED", "EVENT_EXPIRED"):
            kept.pop(event_id, None)
    return [ResumeEvent(type=kind, event_id=event_id, data={}) for event_id, kind in kept.items()]
