"""Moving runs to another version of their definition: one run, or every run a query selects.

`DsmoClient.migrate_run` and `DsmoClient.migrate` build on these (and a replay, on
`recorded_moves`, to move where its original moved); a batch goes through
`batches.run_batch` (paced, reported, idempotent: a run already moved is ``skipped``). A move goes through the run's
`migrate` update, whose validator decides it where the run is; a dry run asks the run what
it would answer instead (`migration_preview`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from dsmo.client import definitions_client, migration_preview, run_status
from dsmo.client.batches import BatchReport, RunOutcome, run_batch
from dsmo.client.client_errors import AlreadyOnTarget, DefinitionNotFound, MigrationNotAccepted, RunClosed
from dsmo.client.core import ClientCore
from dsmo.client.query_errors import given_query
from dsmo.client.rpc_errors import update_failure
from dsmo.client.run_selection import Scope, Selection, count_current
from dsmo.client.unanswered import closed_or_missing, update_run
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.identifiers import agent_name_problem
from dsmo.workflows.contracts.migration_io import (
    ALREADY_ON_TARGET,
    MIGRATE_UPDATE,
    MigrationAck,
    MigrationRequest,
)
from dsmo.workflows.definition.model import AgentDefinition


async def send(core: ClientCore, run_id: str, request: MigrationRequest) -> MigrationAck:
    """Ask the run to move through its `migrate` update; its answer, or why it refused."""
    handle = core.temporal.get_workflow_handle(run_id)
    try:
        return await update_run(core.temporal, handle, MIGRATE_UPDATE, request, MigrationAck)
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        if isinstance(cause, ApplicationError) and cause.type == ALREADY_ON_TARGET:
            raise AlreadyOnTarget(f"run {run_id!r}: {update_failure(err)}") from None
        raise MigrationNotAccepted(f"run {run_id!r}: {update_failure(err)}") from None
    except RPCError as err:
        raise await closed_or_missing(core.settings, handle, err) from None


async def migrate_batch(
    core: ClientCore,
    request: MigrationRequest,
    *,
    from_version: str | None = None,
    query: str | None = None,
    dry_run: bool = False,
    rate: float | None = None,
    limit: int | None = None,
    concurrency: int = 20,
    on_outcome: Callable[[RunOutcome], None] | None = None,
) -> BatchReport:
    """Move every open run of the target's agent that the filter selects (see `DsmoClient.migrate`)."""
    target = request.definition
    scope = selection(target.agent, from_version, None)

    async def one(run_id: str) -> RunOutcome:
        try:
            ack = await (migration_preview.preview if dry_run else send)(core, run_id, request)
        except AlreadyOnTarget:
            return RunOutcome(run_id, "skipped", f"already on {target.version}")
        except RunClosed:
            return RunOutcome(run_id, "skipped", "already ended")
        except MigrationNotAccepted as err:
            return RunOutcome(run_id, "refused", str(err).removeprefix(f"run {run_id!r}: "))
        where = f"{ack.from_node} -> {ack.to_node}" + ("" if ack.waiting else " at its next node boundary")
        return RunOutcome(run_id, "would" if dry_run else "done", where, ack.model_dump(mode="json"))

    return await run_batch(
        core,
        "migrate",
        query or scope,
        one,
        dry_run=dry_run,
        rate=rate,
        limit=limit,
        concurrency=concurrency,
        on_outcome=on_outcome,
        scope=scope if query else None,
        runs=Scope.OPEN,
    )


async def published_target(core: ClientCore, target: AgentDefinition) -> AgentDefinition:
    """``target``, once it is known to be a published version (a move goes only to one).

    Raises:
        DefinitionNotFound: ``target`` is not among its agent's published versions.
    """
    try:
        published = await definitions_client.versions(core, target.agent)
    except DefinitionNotFound:
        published = []
    if target.workflow_version not in published:
        raise DefinitionNotFound(
            f"to: version {target.version} ({target.workflow_version}) of {target.agent!r} is not published; "
            "publish it first (dsmo definitions publish FILE)"
        )
    return target


def selection(agent: str, from_version: str | None, query: str | None) -> str:
    """The visibility filter of a batch: the agent's runs, on ``from_version`` if given, and ``query``.

    A batch takes only the open ones, each judged by its current execution (`run_selection`).

    Raises:
        DefinitionNotFound: ``agent`` is not an agent's name.
        InvalidQuery: ``query`` is empty or blank (it would take every run of the agent).
    """
    problem = agent_name_problem(agent)
    if problem:
        raise DefinitionNotFound(problem)
    clauses = [f"{sa.AGENT_NAME.name} = '{agent}'"]
    if from_version:
        clauses.append(f"{sa.WORKFLOW_VERSION.name} = '{from_version}'")
    if given_query(query) is not None:
        clauses.append(f"({query})")
    return " AND ".join(clauses)


async def migrate_run(
    core: ClientCore, run_id: str, to: AgentDefinition | str, *, dry_run: bool = False, **move: Any
) -> MigrationAck:
    """Move one run to another published version of its agent (`RunHandle.migrate` documents it)."""
    if isinstance(to, str):
        to = await definitions_client.resolve_version(core, (await run_status.status(core, run_id)).agent, to)
    request = _move(await published_target(core, to), **move)
    return await (migration_preview.preview if dry_run else send)(core, run_id, request)


async def migrate_agent(
    core: ClientCore,
    agent: str,
    to: AgentDefinition | str,
    *,
    from_version: str | None = None,
    dry_run: bool = False,
    query: str | None = None,
    rate: float | None = None,
    limit: int | None = None,
    concurrency: int = 20,
    on_outcome: Callable[[RunOutcome], None] | None = None,
    publish: bool = False,
    **move: Any,
) -> BatchReport:
    """Move every open run of ``agent`` that the selection takes (`DsmoClient.migrate` documents it).

    ``publish``: ``to`` is a definition to publish first, once the batch's own arguments are
    checked (a batch refused for its ``from_version`` or its filter publishes nothing).

    Raises:
        DefinitionNotFound: ``to`` or ``from_version`` is not a published version of ``agent``.
        InvalidQuery: The filter is empty, or Temporal refused it; nothing was published or touched.
    """
    given_query(query)
    target = to if isinstance(to, AgentDefinition) else await definitions_client.resolve_version(core, agent, to)
    if target.agent != agent:
        raise DefinitionNotFound(f"to: version {target.version} is of agent {target.agent!r}, not {agent!r}")
    source = await definitions_client.resolve_version(core, agent, from_version) if from_version else None
    if publish and not dry_run:
        # A filter Temporal refuses is reported now, before the version exists for new runs too.
        await count_current(core.temporal, Selection(query, selection(agent, None, None), Scope.OPEN))
        await definitions_client.publish_unchecked(core, target)
    request = _move(target if dry_run else await published_target(core, target), **move)
    return await migrate_batch(
        core,
        request,
        from_version=source.workflow_version if source else None,
        query=query,
        dry_run=dry_run,
        rate=rate,
        limit=limit,
        concurrency=concurrency,
        on_outcome=on_outcome,
    )


def _move(
    target: AgentDefinition,
    *,
    node_map: Mapping[str, str] | None = None,
    leave_wait: bool = False,
    restart_timers: bool = False,
    set_variables: Mapping[str, Any] | None = None,
    reason: str = "",
    by: str = "user",
) -> MigrationRequest:
    """The move the run is asked to make (an unknown option is a TypeError naming it)."""
    return MigrationRequest(
        definition=target,
        node_map=dict(node_map or {}),
        leave_wait=leave_wait,
        restart_timers=restart_timers,
        set=dict(set_variables or {}),
        requested_by=by,
        reason=reason,
    )
