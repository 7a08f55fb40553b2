"""How a run begins: RUN_CREATED, a slot under the agent's concurrency limit, the prepared input.

A DSMO starter writes the input artifact and config snapshot before it starts the run
(`request.prepared`); a run started any other way prepares them itself in a local activity.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow

from dsmo.workflows.common import patches
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.identifiers import run_id_problem
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.slot_io import SlotRequest
from dsmo.workflows.contracts.subject_io import SUBJECT_KEY, SubjectKey, SubjectKeyRequest
from dsmo.workflows.contracts.trail_io import values_digest
from dsmo.workflows.definition.model import effective_parameters
from dsmo.workflows.definition.subjects import SubjectMissing, render_subject
from dsmo.workflows.run.activity_calls import ActivityFailed
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import RunEnded, ServiceFailed
from dsmo.workflows.run.flow_slots import take_all
from dsmo.workflows.run.service_budgets import BUDGETS, budget_spent, call_service, record_service_failure
from dsmo.workflows.run.throttle_pass import pass_start

# workflow.patched id: a run started with an id that is not a run id (around DSMO's checks) ends
# at once and writes nothing; the marker is written only by such runs.
STRICT_RUN_ID_PATCH = "strict-run-id"


async def begin(run: Run) -> None:
    """Record the start, wait for a slot if the agent is limited, and have the input prepared."""
    state = run.state
    subject_problem = await settle_subject(run)
    request = run.request
    state.audit.record(
        "RUN_CREATED",
        at=workflow.now(),
        data={
            "agent": state.agent,
            "version": run.definition.version,
            "correlationId": run.correlation_id,
            # The subject by its keyed fingerprint: the trail names whom it is about without naming them.
            **(
                {"subject": request.subject.seal.fingerprint, "subjectKey": request.subject.seal.key_id}
                if request.subject
                else {}
            ),
            **({"parentRunId": request.parent_run_id} if request.parent_run_id else {}),
            **_numbered(request.origin),
            **({"startAt": request.start_at} if request.start_at else {}),
            # The input's SHA-256 binds an exported archive's input to the trail. No patch: it
            # changes no command, and a run replayed on this code in its first generation
            # re-records its whole trail (nothing of it left the run before its first hand-over).
            "inputSha256": values_digest(request.input),
        },
    )
    workflow.logger.info("Starting execution %s (%s@%s)", state.run_id, state.agent, state.workflow_version)
    if request.prepared is None:
        # A starter that is not DSMO's may not have set the start search attributes.
        state.publish()
    if subject_problem is not None:
        state.enter(RunStatus.RUNNING)
        raise RunEnded(RunStatus.FAILED, "", subject_problem)
    problem = run_id_problem(state.run_id)
    if problem and patches.patched(STRICT_RUN_ID_PATCH):
        # Started around DSMO's checks (e.g. `temporal workflow start --workflow-id $'x\n'`): no
        # object key can be built from this id, so nothing is written and the run ends here.
        state.enter(RunStatus.RUNNING)
        raise RunEnded(RunStatus.FAILED, "", problem)
    limit = run.definition.rate_limit
    if limit is not None:
        # PENDING while queued behind the agent's concurrency limit.
        state.pending_reason = f"queued: agent {state.agent} allows {limit.max_concurrent} concurrent runs"
        await slot_call(run, contracts.REQUEST_SLOT, limit.max_concurrent)
        run.slot_held = True
        await workflow.wait_condition(lambda: run.slot_granted)
    # PENDING while throttled (throttle_pass.py), then in line behind a concurrency key's runs (flow_slots.py).
    # Admission is decided by the starter (`dsmo/client/starts.py` says why and in what order); the
    # run takes here only what the starter could not: slots it did not claim (a delayed start, a run
    # in line, one started around DSMO's client), the agent's limit and rate, which span all starters.
    await pass_start(run)
    await take_all(run)
    # A DSMO starter starts a run it prepared, with no delay and no rate limit, as `running`
    # (see dsmo/client/starts.py:_start_status): the value is in the start event, so this is decided
    # the same way on replay, and runs started `pending` (all older ones) upsert as before.
    started_running = workflow.info().typed_search_attributes.get(sa.AGENT_EXECUTION_STATUS) == RunStatus.RUNNING.value
    state.enter(RunStatus.RUNNING, published=request.prepared is not None and started_running)
    if request.prepared is None:
        prepared = await _prepare(run)
    else:
        prepared = request.prepared
        # Yield once, as awaiting the preparation did: a cancel requested before the run
        # started ends it here, before its first node does anything.
        await asyncio.sleep(0)
    run.input_uri, state.config_ref = prepared.input_uri, prepared.config_ref
    state.variables.setdefault("stages", {})


def _numbered(origin: dict[str, str]) -> dict[str, Any]:
    """The start's origin as the trail records it: counts as numbers (the request carries strings)."""
    starts = origin.get("debouncedStarts")
    if starts is not None and starts.isascii() and starts.isdigit() and len(starts) < 10:
        return {**origin, "debouncedStarts": int(starts)}
    return origin


async def settle_subject(run: Run) -> str | None:
    """Learn whom the run is about before it records anything: its definition's ``subject``
    rendered from its input, or its parent's; returns why it cannot (the run then fails).

    Only definitions that name a subject, and children of runs that have one, issue a command here.
    """
    request, definition = run.request, run.definition
    if definition.subject is None:
        if request.subject is not None:
            _publish_subject(request.subject.subject)  # a child inherits its parent's
        return None
    try:
        subject = render_subject(definition.subject, request.input)
    except SubjectMissing as err:
        return str(err)
    if request.subject is None or request.subject.subject != subject:
        # Started by a parent with another subject, or around DSMO's starter: ask for the keys.
        try:
            key = await call_service(
                SUBJECT_KEY, SubjectKeyRequest(subject=subject), result_type=SubjectKey, local=True
            )
        except ActivityFailed as failed:
            return f"the keys of the run's data subject: {failed.message}"
        run.request = request.model_copy(update={"subject": key})
    _publish_subject(subject)
    return None


def _publish_subject(subject: str) -> None:
    if workflow.info().typed_search_attributes.get(sa.DATA_SUBJECT) != subject:
        workflow.upsert_search_attributes([sa.DATA_SUBJECT.value_set(subject)])


async def _prepare(run: Run) -> contracts.PreparedRun:
    """Write the input artifact and config snapshot when the starter did not (see ExecutionRequest)."""
    state, definition = run.state, run.definition
    snapshot = contracts.PrepareRun(
        run_id=state.run_id,
        workflow_version=state.workflow_version,
        input=state.variables,
        definition=definition.model_dump(mode="json", exclude_none=True),
        effective=effective_parameters(definition),
        seal=run.seal,
    )
    try:
        # Local: two small write-once puts need no round trip through a task queue.
        return await call_service(contracts.PREPARE_RUN, snapshot, result_type=contracts.PreparedRun, local=True)
    except ActivityFailed as failed:
        if not budget_spent(failed.error):  # refused by the store (a contradicting snapshot): no retry helps
            raise RunEnded(RunStatus.FAILED, "", f"preparing the run failed: {failed.message}") from None
        budget = BUDGETS[contracts.PREPARE_RUN]
        raise ServiceFailed(
            contracts.PREPARE_RUN, record_service_failure(state, budget, failed.error, stage=None)
        ) from None


async def slot_call(run: Run, activity: str, max_concurrent: int) -> None:
    """Ask the agent's limiter for a slot (REQUEST_SLOT) or give it back (RELEASE_SLOT)."""
    state = run.state
    requesting = activity == contracts.REQUEST_SLOT
    slot = SlotRequest(agent=state.agent, run_id=state.run_id, max_concurrent=max_concurrent)
    try:
        await call_service(activity, slot, result_type=type(None), cancellation_is_failure=not requesting)
    except ActivityFailed as failed:
        reason = record_service_failure(state, BUDGETS[activity], failed.error, stage=None)
        workflow.logger.warning("%s failed for %s: %s", activity, state.run_id, reason)
        if requesting:
            raise ServiceFailed(activity, reason) from None
