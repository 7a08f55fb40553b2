"""Starting a run: the one `start`, the admission decision, the run's preparation, Temporal's start.

Admission is decided here, in one place, in this order, before anything is written:

1. A **debounced** definition's start never becomes a run here: it joins its key value's batch
   (`debounced_starts`), whose debouncer starts one run once the key is quiet. Nothing else
   applies to it now; the batch's run is admitted when the debouncer starts it.
2. The run's **data subject** (`subject_starts`) is rendered and its keys learned, so the input
   is sealed with them when it is written; a missing value refuses the start.
3. Its **concurrency keys' slots** (`flow_starts`) are claimed now, by update-with-start on each
   key's lock, so a busy key's ``onBusy`` (reject, cancel-previous, deliver) acts before the
   run exists and the caller hears the answer. A **delayed** start claims nothing now: it could
   not hold a slot for hours while pending; its workflow asks when it begins, in line like any
   run. What was claimed here travels in the request (``slots_claimed``), so the workflow asks
   only for the rest.

The workflow admits on its own (`workflows/engine/beginning.py`) only what cannot be known or
held here: the agent's ``maxConcurrent`` and rate limit (they count runs across every starter),
the slots of a delayed start, and the subject of a run started around this client (a child run,
Temporal's UI). A run started by this client is never admitted twice.

Longer than most modules: admission stays in one place, in its order, to be read as one.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import (
    Priority,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError

from dsmo.client import debounced_starts, definitions_client, flow_starts, run_health, run_requests, subject_starts
from dsmo.client.client_errors import EventNotAccepted, InvalidInputDocument, NoWorker, RunAlreadyExists
from dsmo.client.core import ClientCore
from dsmo.client.event_checks import initial_events
from dsmo.client.flow_starts import StartReport
from dsmo.client.rpc_errors import update_failure
from dsmo.client.start_preparation import prepare, refuse_kept_trail
from dsmo.client.unanswered import unless_failing, worker_shows
from dsmo.runtime.telemetry import trace_carrier, tracer
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.document_limits import INPUT_LIMITS, DocumentRefused, check_document
from dsmo.workflows.common.identifiers import check_run_id
from dsmo.workflows.common.patches import GENERATION, REVISION
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import ExecutionRequest
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.events.resume_events import EventAck

log = logging.getLogger("dsmo.client")

WORKFLOW_TYPE = "AgentExecution"


async def start(
    core: ClientCore,
    what: str | AgentDefinition | ExecutionRequest,
    input: dict[str, Any] | None = None,
    *,
    version: str | None = None,
    run_id: str | None = None,
    task_queue: str | None = None,
    correlation_id: str | None = None,
    start_delay: timedelta | None = None,
    history_limit: int | None = None,
    events: Sequence[Mapping[str, Any]] = (),
    priority: int | None = None,
    memo: Mapping[str, str] | None = None,
    idempotency_key: str | None = None,
) -> StartReport:
    """Start a run of an agent by name, a definition or a complete request; what became of it.

    `DsmoClient.start` documents each option; a complete request (redrives, replays) carries its
    own input, version, correlation id, history limit and priority.

    Raises:
        ValueError: An option that the kind of ``what`` does not take (named).
    """
    if isinstance(what, ExecutionRequest):
        given: dict[str, object] = {"input": input, "version": version, "correlation_id": correlation_id}
        given |= {"history_limit": history_limit, "priority": priority}
        for name, value in given.items():
            if value is not None:
                raise ValueError(f"{name}: a complete request carries it; give it in the request")
        request = what
    else:
        if isinstance(what, str):
            definition = await definitions_client.definition(core, what, version)
        elif version is not None:
            raise ValueError("version: give it with an agent name, not with a definition object")
        else:
            definition = what
        request = ExecutionRequest(
            definition=definition, input=input or {}, correlation_id=correlation_id, priority=checked_priority(priority)
        )
        if history_limit is not None:
            request.history_limit = history_limit
    return await start_request(
        core,
        request,
        run_id=run_id,
        task_queue=task_queue,
        start_delay=start_delay,
        events=events,
        memo=memo,
        idempotency_key=idempotency_key,
    )


async def start_request(
    core: ClientCore,
    request: ExecutionRequest,
    *,
    run_id: str | None = None,
    task_queue: str | None = None,
    start_delay: timedelta | None = None,
    events: Sequence[Mapping[str, Any]] = (),
    memo: Mapping[str, str] | None = None,
    idempotency_key: str | None = None,
) -> StartReport:
    """Admit and start a run from a complete request (the module's docstring says in what order).

    Raises:
        InvalidInputDocument: The input is invalid, or lacks a value a key or the subject reads.
        RunAlreadyExists: A run with ``run_id`` exists or existed.
        EventNotAccepted: An event is malformed or no wait of the definition takes it.
        KeyBusy: A concurrency key is busy and says ``onBusy: reject``.
    """
    definition = request.definition
    run_id_given = run_id is not None
    run_id = run_id or f"{definition.agent}-{uuid.uuid4().hex[:12]}"
    check_run_id(run_id)
    first_events = initial_events(definition, events)
    if first_events and start_delay:
        raise EventNotAccepted("events: a delayed start takes no events; deliver them once the run has started")
    _check_input(request.input)
    queue = task_queue or core.settings.temporal.task_queue
    if debounced_starts.debounced(request):  # 1. the batch's run is admitted when it starts
        for given, name in ((first_events, "events"), (start_delay, "start_delay"), (run_id_given, "run_id")):
            if given:  # the batch's run is started by the key's debouncer, with an id of its own
                raise ValueError(f"{name}: a debounced start takes none (its batch's run has its own)")
        return await debounced_starts.join_batch(core, request, queue, idempotency_key=idempotency_key)
    if idempotency_key is not None:
        raise ValueError("idempotency_key: only a debounced start takes one; name the run with run_id instead")
    if first_events and not start_delay and not await worker_shows(core.worker_polling, queue):
        # The first event goes with the start and the run would hold the caller until a worker
        # takes it, then apply it whenever one comes: refused before anything starts instead.
        raise NoWorker(f"events: {run_health.no_worker_hint(queue)}; nothing was started (its events need a worker)")
    if run_id_given:  # an id made here is new (a fork's or a redrive's own is asked about: it was given)
        await refuse_kept_trail(core, run_id)
    request = request.started_on(queue)
    slots = flow_starts.key_slots(request)  # a missing key value is refused before anything starts
    if request.definition.subject is not None:  # 2. ... and so is a missing subject
        request = await subject_starts.with_subject(request, core.artifacts)
    elif request.origin:  # a replay, fork or redrive of a child about its parent's subject
        request = await subject_starts.inherited_subject(request, core.temporal, core.artifacts)
    with tracer.start_as_current_span(f"dsmo.start {definition.agent}", attributes={"dsmo.run_id": run_id}):
        # 3. A delayed run asks for its slots when it starts; any other claims them now.
        admission = (
            await flow_starts.admit(core, slots, run_id, queue, request, first_events, core.artifacts)
            if slots and not start_delay
            else None
        )
        if admission is not None and admission.delivered_to is not None:
            # onBusy: deliver: the key's active run took the start's events; nothing starts.
            return StartReport(admission.delivered_to, "delivered", acks=admission.acks)
        if admission is not None:
            request = request.model_copy(update={"slots_claimed": admission.claimed})
        try:
            status, first_ack = await _start(
                core, request, run_id=run_id, task_queue=queue, start_delay=start_delay, events=first_events, memo=memo
            )
        except BaseException:
            if admission is not None:
                places = [*admission.claimed, *([admission.in_line] if admission.in_line else [])]
                await flow_starts.give_back(core, slots, places, run_id, queue)
            raise
    # The run's answer to each event: one it had already seen is a duplicate, not a delivery.
    acks = [first_ack] if first_ack is not None else []
    for event in first_events[1:]:
        acks.append(
            await run_requests.deliver_event(core, run_id, event["type"], event["data"], event_id=event["event_id"])
        )
    if admission is None:
        return StartReport(run_id, status.value, acks=acks)
    return StartReport(
        run_id, status.value, admission.queued_behind, admission.ahead, list(admission.cancelled), acks=acks
    )


def checked_priority(priority: int | None) -> int | None:
    """A start's priority, checked: 1 (highest) to 5, or None.

    Raises:
        ValueError: It is not 1 to 5.
    """
    if priority is not None and (isinstance(priority, bool) or not 1 <= priority <= 5):
        raise ValueError(f"priority: {priority!r} is not 1 (highest) to 5")
    return priority


def _check_input(document: dict[str, Any]) -> None:
    try:
        check_document(document, field="input", limits=INPUT_LIMITS)
        json.dumps(document, ensure_ascii=False).encode()
    except DocumentRefused as err:
        raise InvalidInputDocument(str(err)) from None
    except (UnicodeEncodeError, ValueError, TypeError):
        raise InvalidInputDocument("input: not valid Unicode JSON (a lone surrogate?)") from None


async def _start(
    core: ClientCore,
    request: ExecutionRequest,
    *,
    run_id: str,
    task_queue: str,
    start_delay: timedelta | None,
    events: list[dict[str, Any]],
    memo: Mapping[str, str] | None = None,
) -> tuple[RunStatus, EventAck | None]:
    """Start the run in Temporal: its status, and its answer to the first event (None without events)."""
    definition = request.definition
    version = definition.workflow_version  # a hash of the canonical definition: computed once
    # A run whose subject's keys could not be learned here prepares itself, once it has them:
    # its input is never written in the clear.
    keyed = request.definition.subject is None or request.subject is not None
    # Started for this code: the run takes its changes without a `workflow.patched` marker each.
    request = request.model_copy(update={"generation": GENERATION, "revision": REVISION})
    if core.prepare_runs and request.checkpoint is None and request.prepared is None and keyed:
        request = request.model_copy(update={"prepared": await prepare(core, request, run_id, version)})
    carrier = trace_carrier()
    status = _start_status(request, start_delay)
    options: dict[str, Any] = dict(
        id=run_id,
        task_queue=task_queue,
        # A run id names one audit trail for good: refuse to reuse it even after it closed.
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        # A second start while the first is open is refused too, never merged into it
        # (USE_EXISTING) or allowed to replace it (TERMINATE_EXISTING); the ingress turns the
        # refusal into "the same run" for a retry that carries the same Idempotency-Key.
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        start_delay=start_delay,
        # The run's trace context: resume events sent later join the same trace. Without
        # a recording tracer there is none to keep (an empty memo still costs a write).
        memo={**({"trace": carrier} if carrier else {}), **(memo or {})} or None,
        priority=Priority(priority_key=request.priority) if request.priority else Priority.default,
        search_attributes=TypedSearchAttributes(
            [
                SearchAttributePair(sa.AGENT_EXECUTION_STATUS, status.value),
                SearchAttributePair(sa.AGENT_NAME, definition.agent),
                SearchAttributePair(sa.WORKFLOW_VERSION, version),
                *([SearchAttributePair(sa.DATA_SUBJECT, request.subject.subject)] if request.subject else []),
            ]
        ),
    )
    ack: EventAck | None = None
    try:
        if events:
            # Start and first event in one request: the run's first workflow task holds both.
            operation: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
                WORKFLOW_TYPE, request, **options
            )
            ack = await unless_failing(
                core.temporal,
                core.handle(run_id),
                core.temporal.execute_update_with_start_workflow(
                    "deliver_event", events[0], start_workflow_operation=operation, result_type=EventAck
                ),
                sent="deliver_event",
            )
        else:
            await core.temporal.start_workflow(WORKFLOW_TYPE, request, **options)
    except WorkflowAlreadyStartedError:
        raise RunAlreadyExists(f"run {run_id!r} already exists; choose another --id") from None
    except WorkflowUpdateFailedError as err:
        raise EventNotAccepted(f"events.0: {update_failure(err)} (the run started)") from None
    core.remember_trace(run_id, carrier)
    return status, ack


def _start_status(request: ExecutionRequest, start_delay: timedelta | None) -> RunStatus:
    """The status a run is started with: `pending` unless it can run at once.

    A run with a start delay, queued behind its agent's rate limit, or in line for a
    concurrency key's slot (one not claimed for it), is `pending` until its workflow admits
    it. One that starts now, prepared here, is `running` from its start
    (as Temporal and Step Functions report a started execution), and its workflow then skips
    the upsert that would set the same value: one visibility write less per run.
    """
    in_line = len(flow_starts.key_slots(request)) > len(request.slots_claimed)
    immediate = not start_delay and request.definition.rate_limit is None and not in_line
    return RunStatus.RUNNING if immediate and request.prepared is not None else RunStatus.PENDING
