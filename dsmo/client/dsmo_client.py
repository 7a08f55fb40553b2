"""The Python API: publish definitions, start runs (by name or definition), list them, deliver
events, read status, audit trail and results, replay and redrive; cancel, redrive and deliver to
many runs at once by visibility filter.

Longer than most modules because `DsmoClient` is one class (a class stays in one module) and its
methods, each with its Args/Returns/Raises, are the public API; what they build on lives beside
it in this package (errors and how Temporal's refusals map to them, event checks, connection,
status views built without the run, why a run gave no answer, trail store, replay, dead
letters, monitoring queries, the agent catalog, batches and bulk operations); the helpers that
need the client's state (start preparation, worker-health probing, the trace cache) stay in it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionDescription,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import (
    Priority,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ApplicationError, CancelledError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from dsmo.activities.artifacts import ArtifactErased, ArtifactStore
from dsmo.activities.definition_store import DefinitionStore, config_key
from dsmo.activities.erasure_log import ErasureLog
from dsmo.activities.plugin_errors import UnknownAgent
from dsmo.activities.preparation import LeftoverInput, RunPreparer
from dsmo.client import (
    agent_catalog,
    bulk_operations,
    debounced_starts,
    erasure,
    flow_starts,
    forks,
    migration,
    monitoring,
    redrive,
    replay,
    rewinds,
    run_export,
    run_health,
    subject_starts,
    trail_pages,
    what_if,
)
from dsmo.client.batches import BatchReport, RunOutcome
from dsmo.client.client_errors import (
    DefinitionNotFound,
    EventMalformed,
    EventNotAccepted,
    InvalidInputDocument,
    NoWorker,
    RunAlreadyExists,
    RunClosed,
    RunNotFound,
    RunNotStarted,
    WorkflowTaskFailing,
)
from dsmo.client.connection import connect_temporal
from dsmo.client.definitions_client import Definitions, PublishedAgent
from dsmo.client.event_checks import check_event, initial_events
from dsmo.client.flow_starts import StartReport
from dsmo.client.monitoring import RunSummary
from dsmo.client.redrive import DeadLetterRow
from dsmo.client.replay import ReplayReport
from dsmo.client.rpc_errors import not_taken, rpc_error, update_failure
from dsmo.client.run_handle import RunHandle
from dsmo.client.run_selection import current_rows
from dsmo.client.status_views import closed_record, ended_view, visibility_view
from dsmo.client.trail_store import TrailStore, TrailVerification, erased_artifacts, verify_export
from dsmo.client.unanswered import QUERY_TIMEOUT, closed_or_missing, query_error, unless_failing, update_run
from dsmo.client.with_start import UpdateGates
from dsmo.config.settings import Settings
from dsmo.runtime.storage import artifact_store
from dsmo.runtime.task_queue_pollers import live_pollers
from dsmo.runtime.telemetry import context_from, trace_carrier, tracer, tracing_enabled
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.document_limits import INPUT_LIMITS, DocumentRefused, check_document
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import check_run_id
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import PreparedRun
from dsmo.workflows.contracts.migration_io import MigrationAck, MigrationRequest
from dsmo.workflows.contracts.rewind_io import RewindAck
from dsmo.workflows.contracts.run_records import (
    AuditEvent,
    ExecutionRequest,
    ExecutionResult,
    StatusView,
    TrailView,
)
from dsmo.workflows.contracts.trail_io import TrailHead
from dsmo.workflows.definition.model import AgentDefinition, effective_parameters
from dsmo.workflows.events.resume_events import (
    DUPLICATE_NOT_RECORDED,
    EventAck,
    EventRejected,
    parse_signal,
)

log = logging.getLogger("dsmo.client")

WORKFLOW_TYPE = "AgentExecution"
TRACE_CACHE_RUNS = 10_000
# A task queue seen with a live poller is not asked again for this long (seconds).
POLLERS_SEEN_FOR = 5.0


class DsmoClient:
    """Publish definitions; start, list, follow, resume, replay and cancel agent runs.

    Build one with `DsmoClient.connect()`; it reads `Settings` from the environment unless given
    some. Methods about one run take its run id (the Temporal workflow id). Failures DSMO can
    name raise a `DsmoError` subclass with a one-line message; each method's Raises says which.
    """

    def __init__(self, client: Client, settings: Settings, *, prepare_runs: bool = True) -> None:
        self.temporal = client
        self.settings = settings
        # Runs are prepared here (input artifact, config snapshot) so the workflow need not; the
        # store is opened on the first start.
        self.prepare_runs = prepare_runs
        self._preparer: RunPreparer | None = None
        self._trails: TrailStore | None = None  # opened when a trail is first read from the store
        self._definitions: DefinitionStore | None = None  # opened when definitions are first used
        # Each run's start trace context (fixed in its memo at start), so events join the run's
        # trace without a describe call per event. Bounded: oldest runs are forgotten first.
        self._run_traces: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._pollers_seen: dict[str, float] = {}  # task queue -> when a live poller was last seen
        self.update_gates = UpdateGates()  # this client's requests in flight to each flow-control workflow

    @classmethod
    async def connect(cls, settings: Settings | None = None, *, lazy: bool = False) -> DsmoClient:
        """Connect to Temporal.

        Args:
            settings: Where Temporal and the object store are; `Settings.from_env()` if omitted.
            lazy: Connect on the first call that needs Temporal instead of now, so work that needs
                only the store (`publish`, `definitions`) runs while Temporal is down.

        Returns:
            A connected client.

        Raises:
            TemporalUnavailable: Temporal cannot be reached.
            SettingsError: A setting is invalid.
        """
        settings = settings or Settings.from_env()
        return cls(await connect_temporal(settings, lazy=lazy), settings)

    # -- runs -------------------------------------------------------------------------------

    async def start(
        self,
        agent_or_definition: str | AgentDefinition,
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
    ) -> str:
        """Start a run of a definition. Run ids are never reused, even after a run has ended.

        Args:
            agent_or_definition: The agent definition to run (see `load_definition`), or the name
                of an agent whose published definition to run (see `publish`): its latest
                version, or ``version``.
            input: The run's input document (checked against the definition's limits).
            version: With an agent name: the published ``workflow_version`` to run (default: the
                latest). Not given with a definition object.
            run_id: The run's id (default: ``<agent>-<random>``).
            task_queue: The workers' task queue (default: the settings').
            correlation_id: A caller's id kept with the run (for example a ticket number).
            start_delay: Keep the run ``pending`` until then; it can be cancelled meanwhile.
            history_limit: Continue as new after this many history events (default: the definition's).
            events: Resume events delivered with the start, in order, each as ``{"type", "data",
                "event_id"?}`` (the ``deliver_event`` envelope; a missing id gets a random one). The
                first goes in the same call as the start (Temporal's update-with-start), so it cannot
                race the run; each is kept in the run's inbox for the wait that takes it.
            priority: 1 (highest) to 5: the run's tasks go ahead of lower ones on the workers' task
                queue (Temporal's task-queue priority; none counts as 3), and ahead of them in a
                concurrency key's line.

        Returns:
            The run id (the Temporal workflow id).

        Raises:
            InvalidInputDocument: ``input`` is too large, too deep or not JSON.
            RunAlreadyExists: A run with ``run_id`` exists or existed.
            InvalidRunId: ``run_id`` is not a valid run id.
            EventNotAccepted: An event is malformed or no wait of the definition takes it (the run
                is not started).
            DefinitionNotFound: No definition is published under the agent name (or no such version).
            KeyBusy: A concurrency key of the run is busy and says ``onBusy: reject``; nothing started.
            ValueError: ``version`` given with a definition object.
        """
        report = await self.submit(
            agent_or_definition,
            input,
            version=version,
            run_id=run_id,
            task_queue=task_queue,
            correlation_id=correlation_id,
            start_delay=start_delay,
            history_limit=history_limit,
            events=events,
            priority=priority,
        )
        return report.run_id

    async def submit(
        self,
        agent_or_definition: str | AgentDefinition,
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
    ) -> StartReport:
        """Start a run as `start` does, and say what the definition's flow control did with it.

        Args:
            agent_or_definition: The definition, or the name of a published agent (see `start`).
            input: The run's input document.
            version: With an agent name: the published version to run (default: the latest).
            run_id: The run's id (default: ``<agent>-<random>``).
            task_queue: The workers' task queue (default: the settings').
            correlation_id: A caller's id kept with the run.
            start_delay: Keep the run ``pending`` until then.
            history_limit: Continue as new after this many history events (default: the definition's).
            events: Resume events delivered with the start (see `start`).
            priority: 1 (highest) to 5 (see `start`).
            memo: Kept in the run's Temporal memo (the ingress keeps which start made the run).

        Returns:
            The run id, whether it runs at once or waits in line (for which key, behind how many
            runs), and the runs cancelled to make room for it (``onBusy: cancel-previous``).

        Raises:
            KeyBusy: A concurrency key of the run is busy and says ``onBusy: reject``; nothing started.
            InvalidInputDocument: The input is invalid, or lacks a value a concurrency key reads.
            RunAlreadyExists: A run with ``run_id`` exists or existed.
            DefinitionNotFound: No definition is published under the agent name.
        """
        if isinstance(agent_or_definition, str):
            definition = await self.definition(agent_or_definition, version)
        elif version is not None:
            raise ValueError("version: give it with an agent name, not with a definition object")
        else:
            definition = agent_or_definition
        request = ExecutionRequest(
            definition=definition, input=input or {}, correlation_id=correlation_id, priority=_priority(priority)
        )
        if history_limit is not None:
            request.history_limit = history_limit
        return await self.submit_request(
            request, run_id=run_id, task_queue=task_queue, start_delay=start_delay, events=events, memo=memo
        )

    async def start_request(
        self,
        request: ExecutionRequest,
        *,
        run_id: str | None = None,
        task_queue: str | None = None,
        start_delay: timedelta | None = None,
        events: Sequence[Mapping[str, Any]] = (),
    ) -> str:
        """Start a run from a complete request; redrives and replays use it to set where it starts.

        Args:
            request: The definition, input and options of the run (``start_at``, ``origin``, ``replay``).
            run_id: The run's id (default: ``<agent>-<random>``).
            task_queue: The workers' task queue (default: the settings').
            start_delay: Keep the run ``pending`` until then.
            events: Resume events delivered with the start (see `start`).

        Returns:
            The run id.

        Raises:
            InvalidInputDocument: The input is too large, too deep or not JSON.
            RunAlreadyExists: A run with ``run_id`` exists or existed.
            EventNotAccepted: An event is malformed or no wait of the definition takes it.
            KeyBusy: A concurrency key is busy and says ``onBusy: reject``.
        """
        report = await self.submit_request(
            request, run_id=run_id, task_queue=task_queue, start_delay=start_delay, events=events
        )
        return report.run_id

    async def submit_request(
        self,
        request: ExecutionRequest,
        *,
        run_id: str | None = None,
        task_queue: str | None = None,
        start_delay: timedelta | None = None,
        events: Sequence[Mapping[str, Any]] = (),
        memo: Mapping[str, str] | None = None,
    ) -> StartReport:
        """Start a run from a complete request, and say what flow control did with it.

        Args:
            request: The definition, input and options of the run (see `start_request`).
            run_id: The run's id (default: ``<agent>-<random>``).
            task_queue: The workers' task queue (default: the settings').
            start_delay: Keep the run ``pending`` until then.
            events: Resume events delivered with the start (see `start`).
            memo: Kept in the run's Temporal memo (see `submit`).

        Returns:
            The run id, and whether it runs at once or waits in line (see `submit`).

        Raises:
            InvalidInputDocument: The input is invalid, or lacks a value a concurrency key reads.
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
        try:
            check_document(request.input, field="input", limits=INPUT_LIMITS)
            json.dumps(request.input, ensure_ascii=False).encode()
        except DocumentRefused as err:
            raise InvalidInputDocument(str(err)) from None
        except (UnicodeEncodeError, ValueError, TypeError):
            raise InvalidInputDocument("input: not valid Unicode JSON (a lone surrogate?)") from None
        if debounced_starts.debounced(request):
            for given, name in ((first_events, "events"), (start_delay, "start_delay"), (run_id_given, "run_id")):
                if given:  # the batch's run is started by the key's debouncer, with an id of its own
                    raise ValueError(f"{name}: a debounced start takes none (its batch's run has its own)")
            return await debounced_starts.join_batch(self, request, task_queue or self.settings.temporal.task_queue)
        queue = task_queue or self.settings.temporal.task_queue
        request = request.started_on(queue)
        slots = flow_starts.key_slots(request)  # a missing key value is refused before anything starts
        if request.definition.subject is not None:  # ... and so is a missing subject
            request = await subject_starts.with_subject(request, self._trail_store().store)
        elif request.origin:  # a replay, fork or redrive of a child about its parent's subject
            request = await subject_starts.inherited_subject(request, self.temporal, self._trail_store().store)
        with tracer.start_as_current_span(f"dsmo.start {definition.agent}", attributes={"dsmo.run_id": run_id}):
            # A delayed run asks for its slots when it starts; any other claims them now.
            admission = (
                await flow_starts.admit(self, slots, run_id, queue, request, first_events, self._trail_store().store)
                if slots and not start_delay
                else None
            )
            if admission is not None and admission.delivered_to is not None:
                # onBusy: deliver: the key's active run took the start's events; nothing starts.
                return StartReport(admission.delivered_to, "delivered", acks=admission.acks)
            if admission is not None:
                request = request.model_copy(update={"slots_claimed": admission.claimed})
            try:
                status = await self._start(
                    request,
                    run_id=run_id,
                    task_queue=task_queue,
                    start_delay=start_delay,
                    events=first_events,
                    memo=memo,
                )
            except BaseException:
                if admission is not None:
                    places = [*admission.claimed, *([admission.in_line] if admission.in_line else [])]
                    await flow_starts.give_back(self, slots, places, run_id, queue)
                raise
        for event in first_events[1:]:
            await self.deliver_event(run_id, event["type"], event["data"], event_id=event["event_id"])
        if admission is None:
            return StartReport(run_id, status.value)
        return StartReport(run_id, status.value, admission.queued_behind, admission.ahead, list(admission.cancelled))

    async def _start(
        self,
        request: ExecutionRequest,
        *,
        run_id: str,
        task_queue: str | None,
        start_delay: timedelta | None,
        events: list[dict[str, Any]],
        memo: Mapping[str, str] | None = None,
    ) -> RunStatus:
        definition = request.definition
        version = definition.workflow_version  # a hash of the canonical definition: computed once
        # A run whose subject's keys could not be learned here prepares itself, once it has them:
        # its input is never written in the clear.
        keyed = request.definition.subject is None or request.subject is not None
        if self.prepare_runs and request.checkpoint is None and request.prepared is None and keyed:
            request = request.model_copy(update={"prepared": await self._prepare(request, run_id, version)})
        carrier = trace_carrier()
        status = self._start_status(request, start_delay)
        options: dict[str, Any] = dict(
            id=run_id,
            task_queue=task_queue or self.settings.temporal.task_queue,
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
        try:
            if events:
                # Start and first event in one request: the run's first workflow task holds both.
                operation: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
                    WORKFLOW_TYPE, request, **options
                )
                await self.temporal.execute_update_with_start_workflow(
                    "deliver_event", events[0], start_workflow_operation=operation, result_type=EventAck
                )
            else:
                await self.temporal.start_workflow(WORKFLOW_TYPE, request, **options)
        except WorkflowAlreadyStartedError:
            raise RunAlreadyExists(f"run {run_id!r} already exists; choose another --id") from None
        except WorkflowUpdateFailedError as err:
            raise EventNotAccepted(f"events.0: {update_failure(err)} (the run started)") from None
        self._remember_trace(run_id, carrier)
        return status

    @staticmethod
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

    async def _prepare(self, request: ExecutionRequest, run_id: str, version: str) -> PreparedRun | None:
        """Write the run's input artifact and config snapshot; None leaves it to the workflow.

        The workflow would otherwise do it in a local activity at its start (two more workflow
        activations per run). If the store cannot be reached now, the run still starts and its
        workflow prepares it, retrying until the store is back.
        """
        definition = request.definition

        def config() -> tuple[dict[str, Any], dict[str, Any]]:
            return definition.model_dump(mode="json", exclude_none=True), effective_parameters(definition)

        try:
            if self._preparer is None:
                self._preparer = RunPreparer(await asyncio.to_thread(artifact_store, self.settings))
            preparer, seal = self._preparer, request.subject.seal if request.subject else None
            try:
                return await asyncio.to_thread(
                    lambda: preparer.prepare_run(run_id, version, request.input, config, seal=seal)
                )
            except LeftoverInput:
                # An earlier start of this id wrote its input and then failed, or a run has it.
                if await self._exists(run_id):
                    raise RunAlreadyExists(f"run {run_id!r} already exists; choose another --id") from None
                return await asyncio.to_thread(
                    lambda: preparer.prepare_run(
                        run_id, version, request.input, config, replace_leftover=True, seal=seal
                    )
                )
        except DsmoError:
            raise  # the store answered, and refused (a config snapshot that contradicts this version)
        except Exception as err:  # noqa: BLE001 - the workflow prepares the run itself
            log.warning("run %s: preparing at start failed (%s); the workflow will prepare it", run_id, err)
            return None

    async def _exists(self, run_id: str) -> bool:
        try:
            await self._handle(run_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return False
            raise rpc_error(self.settings, run_id, err) from None
        except (TypeError, ValueError):
            return True  # described, though not decodable (the time-skipping server)
        return True

    async def status(self, run_id: str) -> StatusView:
        """The run's status; for an ended run with no worker, from its history; else from visibility.

        A run whose workflow task keeps failing, or whose task queue no worker polls, cannot
        answer the `status` query. An ended run's view then comes from the record it ended with
        (its result in Temporal's history: status, path, outcome, no worker needed); otherwise
        it holds what visibility knows (status, wait, deadline) and says why in ``problem``.

        Args:
            run_id: The run.

        Returns:
            Status, current node, the WAITING structure, variables and any problem.

        Raises:
            RunNotFound: No run has this id.
        """
        described = await self._describe(run_id)
        if described is not None:
            failure = await run_health.workflow_task_failure(self.temporal, described)
            if failure is not None:
                return visibility_view(described, problem=run_health.failing_hint(failure), failure=failure)
            if not await self._worker_polling(described.task_queue):
                if described.close_time is not None and (ended := await self._ended_view(described)) is not None:
                    return ended
                return visibility_view(described, problem=run_health.no_worker_hint(described.task_queue))
        try:
            view: StatusView = await self._query(run_id, "status", StatusView)
        except RunNotStarted:
            if described is None:
                raise
            return visibility_view(described)
        except (WorkflowTaskFailing, NoWorker) as err:  # it began failing, or its worker stopped, just now
            described = await self._describe(run_id)
            if described is None:
                raise
            if described.close_time is not None and (ended := await self._ended_view(described)) is not None:
                return ended
            failure = await run_health.workflow_task_failure(self.temporal, described)
            return visibility_view(described, problem=str(err).split(": ", 1)[-1], failure=failure)
        except DsmoError:
            # An ended run whose query failed otherwise (its worker stopped while answering): its
            # history still holds how it ended.
            if described is None or described.close_time is None:
                raise
            if (ended := await self._ended_view(described)) is None:
                raise
            return ended
        if view.queued_for is not None and view.status is RunStatus.PENDING:
            return await flow_starts.with_place_in_line(self, view)
        return view

    async def _ended_view(self, described: WorkflowExecutionDescription) -> StatusView | None:
        """An ended run's view from the record its history holds (no query, no worker); None if
        it holds none (a run terminated from outside, or cancelled before it recorded how)."""
        record = await closed_record(self.temporal, described.id)
        if record is None:
            return None
        return ended_view(described, record, lambda version: self._trail_store().store.uri(config_key(version)))

    async def _describe(self, run_id: str) -> WorkflowExecutionDescription | None:
        """The run's description; None if the server's answer cannot be decoded (Temporal's
        time-skipping test server sends search attributes the SDK cannot parse)."""
        try:
            return await self._handle(run_id).describe()
        except RPCError as err:
            raise rpc_error(self.settings, run_id, err) from None
        except (TypeError, ValueError):
            return None

    async def _worker_polling(self, task_queue: str) -> bool:
        """Is a live worker polling ``task_queue``? A yes is remembered for a few seconds."""
        now = asyncio.get_running_loop().time()
        seen = self._pollers_seen.get(task_queue)
        if seen is not None and now - seen < POLLERS_SEEN_FOR:
            return True
        try:
            polling = bool(await live_pollers(self.temporal, task_queue))
        except RPCError:
            return True  # cannot tell: let the query decide
        if polling:
            self._pollers_seen[task_queue] = now
        return polling

    async def cancel(self, run_id: str, *, reason: str, by: str = "user") -> None:
        """Cancel a run in any non-terminal state (PENDING included); the run records who and why.

        Args:
            run_id: The run.
            reason: Why, recorded as `cancelReason`.
            by: Who, recorded as `cancelledBy`.

        Raises:
            RunClosed: The run has ended already.
            RunNotFound: No run has this id.
        """
        try:
            view: StatusView | None = await self.status(run_id)
        except (WorkflowTaskFailing, NoWorker):
            # The run cannot answer a query now. Temporal still records the request (and refuses
            # it for a run that has ended): the run unwinds as soon as its task runs again.
            view = None
        if view is not None and view.status.terminal:
            raise RunClosed(f"run {run_id!r} has already ended ({view.status}); nothing to cancel")
        try:
            await self._handle(run_id).cancel(reason=json.dumps({"cancelledBy": by, "cancelReason": reason}))
        except RPCError as err:
            raise rpc_error(self.settings, run_id, err) from None

    async def events(self, run_id: str, *, live: bool = False) -> list[AuditEvent]:
        """The run's audit trail so far: from the run, or from its exported trail once it has ended.

        A run that has ended exported its whole trail to the store; that export is read, so an
        ended run's trail needs no worker (and no replay of its history).

        Args:
            run_id: The run.
            live: Ask the run itself even if it has ended (needs a worker): its own record, to
                check the export against.

        Returns:
            The audit events, in order.

        Raises:
            RunNotFound: No run has this id.
            NoWorker: No worker answers a run that has not ended (or exported no trail).
        """
        if not live and (exported := await self._exported_events(run_id)) is not None:
            return exported
        view = await self.trail(run_id)
        if not view.head.segments:
            return view.events
        earlier = await asyncio.to_thread(self._trail_store().segment_events, run_id, view.head.segments)
        return earlier + view.events

    async def trail(self, run_id: str) -> TrailView:
        """Where the run's trail segments in the store end (by Temporal's own record), and the events after.

        Args:
            run_id: The run.

        Returns:
            The head (segments, last sequence number, its chain hash) and the events after it.

        Raises:
            RunNotFound: No run has this id.
        """
        try:
            view: TrailView = await self._query(run_id, "trail", TrailView)
        except DsmoError as err:
            if "unknown queryType" not in str(err):
                raise
            # A worker from before trail segments: its runs carry the whole trail.
            return TrailView(head=TrailHead(), events=await self._query(run_id, "events", list[AuditEvent]))
        return view

    async def _exported_events(self, run_id: str) -> list[AuditEvent] | None:
        """The trail an ended run exported (`audit/{run_id}.jsonl`), or None if it has not ended or has none.

        A run Temporal no longer has (erased, or past the namespace's retention) is read from its
        export too: only an ended run exports one.
        """
        if not await self._has_ended(run_id):
            return None
        return await asyncio.to_thread(self._trail_store().exported_events, run_id)

    async def _has_ended(self, run_id: str) -> bool:
        """Whether the run has ended (or Temporal no longer has it): only such a run exports its trail."""
        try:
            return (await self._handle(run_id).describe()).close_time is not None
        except RPCError as err:
            return err.status == RPCStatusCode.NOT_FOUND
        except (TypeError, ValueError):  # (the time-skipping server's attributes do not decode)
            return False

    async def events_page(
        self,
        run_id: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int = trail_pages.DEFAULT_LIMIT,
        live: bool = False,
    ) -> trail_pages.TrailPage:
        """One page of the run's audit trail, reading only the part of the trail the page needs.

        Args:
            run_id: The run.
            after: Events after this sequence number (a page's ``next_after``).
            before: Events before this sequence number (a page's ``previous_before``).
            limit: At most this many events (1 to 1000). With neither cursor: the latest ones.
            live: As for `events`.

        Returns:
            The events, the trail's length, and the cursors of the pages next to it.

        Raises:
            DsmoError: A cursor or the limit is out of range.
            RunNotFound: No run has this id.
        """
        return await trail_pages.trail_page(self, run_id, after=after, before=before, limit=limit, live=live)

    def event_pages(
        self, run_id: str, *, after: int = 0, limit: int = trail_pages.MAX_LIMIT, live: bool = False
    ) -> AsyncIterator[trail_pages.TrailPage]:
        """The run's trail from ``after`` to its end, page by page (`events_page` with each next cursor).

        Args:
            run_id: The run.
            after: Start after this sequence number (0: from the start).
            limit: Events a page (1 to 1000).
            live: As for `events`.

        Returns:
            An async iterator of the pages; one page of events is parsed at a time.

        Raises:
            DsmoError: ``after`` or ``limit`` is out of range.
            RunNotFound: No run has this id.
        """
        return trail_pages.trail_pages(self, run_id, after=after, limit=limit, live=live)

    @property
    def artifacts(self) -> ArtifactStore:
        """The artifact store this client reads (and writes run inputs to), with the subjects' keys."""
        return self._trail_store().store

    async def erase_subject(
        self, subject: str, *, reason: str, by: str = "user", cancel_runs: bool = False, dry_run: bool = False
    ) -> erasure.ErasureReport:
        """Erase a data subject: destroy its key, delete its runs' histories, append to the erasure log.

        Every artifact sealed with the subject's key becomes unreadable by anyone; the runs'
        exported audit trails stay and still verify. See `erasure` for the order of the steps.

        Args:
            subject: The subject's id, as the definition's ``subject`` renders it.
            reason: Why (kept in the erasure log).
            by: Who (kept in the erasure log, and as the cancelled runs' ``cancelledBy``).
            cancel_runs: Cancel the subject's open runs first (their sagas compensate); without
                it, open runs refuse the erasure.
            dry_run: Only list what would be erased.

        Returns:
            The subject's runs, what was cancelled and deleted, and the erasure log's new record.

        Raises:
            SubjectHasOpenRuns: The subject has open runs and ``cancel_runs`` is off.
            DsmoError: ``reason`` is empty, or ``subject`` is not a subject id.
        """
        return await erasure.erase_subject(
            self, subject, reason=reason, by=by, cancel_runs=cancel_runs, dry_run=dry_run
        )

    async def export(self, run_id: str, *, children: bool = False) -> run_export.RunExport:
        """The run as one archive anyone can check offline (`dsmo audit verify --archive`).

        Args:
            run_id: The run.
            children: Include the runs it started (``trigger_agent``), and theirs.

        Returns:
            The zip (trail, Temporal history, definition snapshots, every stored object still
            readable, the erasure records that touch it, and a manifest of SHA-256 sums), the
            manifest's own SHA-256, the runs it holds and what could not be included.

        Raises:
            DsmoError: The run exported no trail and does not answer (or does not exist).
        """
        return await run_export.export_run(self, run_id, children=children)

    async def erasures(self) -> tuple[list[dict[str, Any]], TrailVerification]:
        """The erasure log: every record, oldest first, and the check of its hash chain.

        Returns:
            The records (with their ``seq``, ``prevHash`` and ``hash``) and the chain's verification.
        """
        log = ErasureLog(self.artifacts)
        body = await asyncio.to_thread(log.body)
        records = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        return records, verify_export(body, None, None)

    def _trail_store(self) -> TrailStore:
        if self._trails is None:
            self._trails = TrailStore(artifact_store(self.settings))
        return self._trails

    async def variables(self, run_id: str) -> dict[str, Any]:
        """The run's variables (its input, event variables, `stages`, `steps`).

        Args:
            run_id: The run.

        Returns:
            The variables as the run holds them now.

        Raises:
            RunNotFound: No run has this id.
        """
        values: dict[str, Any] = await self._query(run_id, "variables", dict[str, Any])
        return values

    async def result(self, run_id: str) -> ExecutionResult:
        """Wait for the run to end; failed and timed-out runs return their record too.

        Args:
            run_id: The run.

        Returns:
            The run's final status, variables, path and audit trail.

        Raises:
            WorkflowTaskFailing: The run's workflow task keeps failing, so it cannot end until
                the cause is fixed (raised instead of waiting for ever).
            RunNotFound: No run has this id.
        """
        check_run_id(run_id)
        return await unless_failing(self.temporal, self._handle(run_id), self._result(run_id))

    async def _result(self, run_id: str) -> ExecutionResult:
        handle = self.temporal.get_workflow_handle(run_id, result_type=ExecutionResult)
        try:
            result: ExecutionResult = await handle.result()
            return result
        except WorkflowFailureError as err:
            cause = err.cause
            # Failed, timed-out and cancelled runs carry the seed's record as the failure's details.
            if isinstance(cause, ApplicationError | CancelledError) and cause.details:
                return ExecutionResult.model_validate(cause.details[0])
            if isinstance(cause, CancelledError):
                # Temporal keeps no details on a cancelled run: read the record from the run itself.
                return await self._record_from_queries(run_id)
            raise
        except RPCError as err:
            raise rpc_error(self.settings, run_id, err) from None

    async def _record_from_queries(self, run_id: str) -> ExecutionResult:
        view = await self.status(run_id)
        if view.completed_at is None or view.result_type is None:
            raise DsmoError(f"run {run_id!r} ended without its record")
        return ExecutionResult(
            run_id=run_id,
            status=view.status,
            completed_at=view.completed_at,
            result_type=view.result_type,
            result_summary=view.result_summary,
            error_message=view.error_message,
            failed_action_id=view.failed_action_id,
            cancelled_by=view.cancelled_by,
            cancel_reason=view.cancel_reason,
            compensation=view.compensation,
            path=view.path,
            variables=await self.variables(run_id),
        )

    async def wait_for_status(
        self, run_id: str, statuses: set[RunStatus], *, timeout: float = 30.0, interval: float = 0.1
    ) -> StatusView:
        """Poll the run's status until it is one of ``statuses``.

        Args:
            run_id: The run.
            statuses: The statuses to wait for.
            timeout: Seconds to wait at most.
            interval: Seconds between polls.

        Returns:
            The status view once it matches.

        Raises:
            WorkflowTaskFailing: The run's workflow task keeps failing.
            DsmoError: The run ended in another status, or the timeout passed.
        """
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            view = await self.status(run_id)
            if view.status in statuses and view.problem is None:
                return view
            if view.workflow_task_failure is not None:
                raise WorkflowTaskFailing(f"run {run_id!r}: {view.problem}")
            if view.status.terminal:
                detail = view.error_message or view.result_summary or ""
                raise DsmoError(f"run {run_id} ended {view.status}, not {'/'.join(sorted(statuses))}: {detail}")
            if asyncio.get_running_loop().time() > deadline:
                raise DsmoError(
                    f"run {run_id} is {view.status}, not {'/'.join(sorted(statuses))}, after {timeout:.0f}s"
                )
            await asyncio.sleep(interval)

    # -- published definitions --------------------------------------------------------------

    async def publish(self, definition: AgentDefinition) -> str:
        """Publish a definition: snapshot it (write-once) and make it its agent's latest version.

        Runs started by the agent's name (`start`, the HTTP API, `trigger_agent`) then follow it.
        This checks nothing about the workers; ``client.definitions.publish`` first checks that
        they offer every agent and action the definition names, and is the one to use.

        Args:
            definition: The definition to publish (see `load_definition`).

        Returns:
            The URI of its snapshot in the store (``configs/{workflow_version}.json``).

        Raises:
            DsmoError: The store refused the write (another definition holds this version).
        """
        uri: str = await asyncio.to_thread(self._definition_store().publish, definition)
        return uri

    @property
    def definitions(self) -> Definitions:
        """The published definitions: ``await client.definitions()`` lists them, and
        ``client.definitions.publish(...)`` publishes one, checking the workers offer what it names."""
        return Definitions(self)

    def run(self, run_id: str) -> RunHandle:
        """A handle on the run ``run_id`` (no call is made until one of its methods is).

        Args:
            run_id: The run's id.

        Returns:
            Its handle: status, events, result, cancel, deliver, respond, rewind, fork, migrate, ...
        """
        return RunHandle(self, run_id)

    async def published_agents(self) -> list[PublishedAgent]:
        """Every agent with a published definition, by name (``client.definitions()``).

        Returns:
            For each agent: its name, latest ``workflow_version`` and all published versions.

        Raises:
            botocore.exceptions.BotoCoreError: The object store cannot be reached.
        """
        entries = await asyncio.to_thread(self._definition_store().agents)
        return [PublishedAgent(str(e["agent"]), str(e["latest"]), [str(v) for v in e["versions"]]) for e in entries]

    async def definition(self, agent: str, version: str | None = None) -> AgentDefinition:
        """A published definition of ``agent``.

        Args:
            agent: The agent's name.
            version: The ``workflow_version`` wanted (default: the latest published).

        Returns:
            The definition, as published.

        Raises:
            DefinitionNotFound: Nothing is published under ``agent``, or not ``version`` (named
                in the message).
        """
        try:
            definition: AgentDefinition = await asyncio.to_thread(self._definition_store().resolve, agent, version)
        except UnknownAgent as err:
            raise DefinitionNotFound(str(err)) from None
        return definition

    async def versions(self, agent: str) -> list[str]:
        """The published versions of ``agent``, oldest first.

        Args:
            agent: The agent's name.

        Returns:
            Their ``workflow_version`` hashes.

        Raises:
            DefinitionNotFound: Nothing is published under ``agent``.
        """
        try:
            versions: list[str] = await asyncio.to_thread(self._definition_store().versions, agent)
        except UnknownAgent as err:
            raise DefinitionNotFound(str(err)) from None
        return versions

    async def catalog(self, task_queue: str | None = None) -> dict[str, Any] | None:
        """What the workers polling a task queue now offer: agents (with their schemas), actions, channels.

        Args:
            task_queue: The task queue (default: the settings').

        Returns:
            The union of the catalogs those workers published, or None when no worker polls it.

        Raises:
            RPCError: Temporal cannot be asked who polls.
        """
        queue = task_queue or self.settings.temporal.task_queue
        return await agent_catalog.live_catalog(self.temporal, self._trail_store().store, queue)

    def _definition_store(self) -> DefinitionStore:
        if self._definitions is None:
            self._definitions = DefinitionStore(self._trail_store().store)
        return self._definitions

    # -- listing, replay, redrive -----------------------------------------------------------

    async def runs(
        self,
        query: str | None = None,
        *,
        status: str | None = None,
        agent: str | None = None,
        waiting_for: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[RunSummary]:
        """The runs visibility knows, newest first, each once as it is now, with what each waits for.

        A run that continued as new (moved, rewound, or carried a long history over) is listed by
        its current execution only; earlier executions' rows are never listed.

        Args:
            query: A Temporal visibility query AND-ed with the filters (for example
                ``"StartTime > '2026-01-01T00:00:00Z'"``).
            status: Only runs in this status (`waiting`, `completed`, ...).
            agent: Only runs of this agent.
            waiting_for: Only runs waiting for this (`response`, `document`, `event`, ...).
            limit: At most this many.

        Yields:
            One `RunSummary` per run (use ``async for``).

        Raises:
            ValueError: ``status``, ``agent`` or ``waiting_for`` is not a valid value (named).
            TemporalUnavailable: Temporal cannot be reached.
            DsmoError: Temporal refused the query (its message says why).
        """
        selection = monitoring.runs_selection(query, status=status, agent=agent, waiting_for=waiting_for)
        async for execution in current_rows(self.temporal, selection, limit=limit):
            yield monitoring.run_summary(execution)

    async def replay(
        self,
        run_id: str,
        *,
        from_stage: str | None = None,
        task_queue: str | None = None,
        new_id: str | None = None,
        rerun_llm: bool = False,
    ) -> ReplayReport:
        """Re-execute an ended run as a new linked run (same input, version, config); compare the paths.

        `llm` stages answer from the original's recorded responses, so a replay calls no model
        unless ``rerun_llm``. Waits for the replay to end (a worker must run it).

        Args:
            run_id: The ended run to replay.
            from_stage: Reuse the original's committed outputs before this node; recompute from it on.
            task_queue: The replay's task queue (default: the settings').
            new_id: The replay's run id (default: ``<run_id>.replay-<random>``).
            rerun_llm: Call the models again and report the answers that changed.

        Returns:
            Both paths, both end statuses, the first divergence and each stage's output digests.

        Raises:
            RunNotFound: No run has this id.
            DsmoError: The run has not ended, has no config snapshot, or never reached ``from_stage``.
        """
        store = self._trail_store().store
        try:
            return await replay.replay(
                self, store, run_id, from_stage=from_stage, task_queue=task_queue, new_id=new_id, rerun_llm=rerun_llm
            )
        except (RunNotFound, ArtifactErased):
            trail = await asyncio.to_thread(self._trail_store().export, run_id)
            if trail is None or not (await asyncio.to_thread(erased_artifacts, store, trail))[0]:
                raise
            raise DsmoError(
                f"run {run_id!r} is erased: its data subject was erased, so its input and outputs cannot be "
                "read and it cannot be replayed (its audit trail stays: dsmo audit verify)"
            ) from None

    async def forks(self, run_id: str) -> list[dict[str, Any]]:
        """The forks started from ``run_id`` (`fork`), oldest id first.

        Args:
            run_id: The original run.

        Returns:
            One entry per fork: ``forkId``, ``fromNode``, ``set`` (the names of the variables
            corrected) and ``by``.

        Raises:
            botocore.exceptions.BotoCoreError: The object store cannot be reached.
        """
        return await asyncio.to_thread(forks.forks_of, self._trail_store().store, run_id)

    async def what_if(
        self,
        query: str,
        candidate: AgentDefinition,
        *,
        rerun_llm: bool = False,
        limit: int | None = None,
        task_queue: str | None = None,
        concurrency: int = 10,
        on_run: Callable[[RunOutcome], None] | None = None,
    ) -> what_if.WhatIfReport:
        """Replay recorded runs against a candidate version: what would it have done with them?

        Each ended run of the candidate's agent that ``query`` selects is replayed as a new
        linked run following ``candidate``: its waits take the recorded events, `llm` stages the
        recorded answers (no model call unless ``rerun_llm``), stages with an unchanged agent
        reuse their outputs, and nothing is sent to anyone.

        Args:
            query: A Temporal visibility filter (AND-ed with the agent and ``ended``).
            candidate: The version to try (published or not).
            rerun_llm: Ask the models again instead of reading the recorded answers.
            limit: At most this many runs.
            task_queue: The replays' task queue (default: the settings').
            concurrency: At most this many replays in flight at once.
            on_run: Called with each run's outcome as it is known.

        Returns:
            Per run: same path or where it first diverged, and both end statuses; a summary.

        Raises:
            InvalidQuery: Temporal refused the filter; nothing was replayed.
        """
        return await what_if.what_if(
            self,
            self._trail_store().store,
            query,
            candidate,
            rerun_llm=rerun_llm,
            limit=limit,
            task_queue=task_queue,
            concurrency=concurrency,
            on_run=on_run,
        )

    async def fork(
        self,
        run_id: str,
        from_node: str,
        *,
        set_variables: Mapping[str, Any] | None = None,
        to: AgentDefinition | str | None = None,
        node_map: Mapping[str, str] | None = None,
        task_queue: str | None = None,
        new_id: str | None = None,
        reason: str = "",
        by: str = "user",
    ) -> str:
        """Start a new linked run that redoes ``run_id`` from ``from_node``, keeping what happened before.

        Up to ``from_node`` the fork takes the original's record (committed stage outputs, the
        events its waits took, saga outcomes; no agent called, nothing sent); from there on it runs
        live, with ``set_variables`` applied. The original may have ended or still be running; it
        is not touched. The fork's trail says what it forks (`RUN_CREATED` ``forkOf`` and
        `RUN_FORKED`).

        Args:
            run_id: The run to fork.
            from_node: The node the fork runs live from (one on the original's path).
            set_variables: Corrections set when the fork reaches ``from_node``.
            to: Fork onto another published version (hash or label, or a definition), moving
                there as `migrate_run` moves a run.
            node_map: With ``to``: node ids of the original's version -> the target's.
            task_queue: The fork's task queue (default: the settings').
            new_id: The fork's run id (default: ``<root>.fork-<random>``; the root is ``run_id``
                without the suffixes of earlier forks, replays and what-ifs).
            reason: Why, recorded with a move to ``to``.
            by: Who asked, recorded with a move to ``to``.

        Returns:
            The fork's run id.

        Raises:
            DsmoError: ``from_node`` is not a node the original reached, the original has no
                config snapshot, or the move to ``to`` is refused (named by its option).
            DefinitionNotFound: ``to`` is not a published version of the run's agent.
            RunNotFound: No run has this id.
        """
        return await forks.fork(
            self,
            self._trail_store().store,
            run_id,
            from_node,
            set_variables=set_variables,
            to=to,
            node_map=node_map,
            task_queue=task_queue,
            new_id=new_id,
            reason=reason,
            by=by,
        )

    async def rewind(
        self,
        run_id: str,
        to_node: str,
        *,
        reason: str,
        set_variables: Mapping[str, Any] | None = None,
        compensate: bool = True,
        by: str = "user",
    ) -> RewindAck:
        """Send a waiting run back to an earlier node of its path, with corrections.

        The run enters ``to_node`` again with its variables as they were when it first entered
        it, plus ``set_variables``. The saga steps it did since are undone first, last first, as
        a failure would undo them (unless ``compensate`` is False). Stage outputs and consumed
        events after the node stay in the store and the trail, no longer the run's current ones;
        events kept in its inbox stay. The trail records `RUN_REWOUND`.

        Args:
            run_id: The run; it must be waiting.
            to_node: A node on the run's path.
            reason: Why, recorded in the trail.
            set_variables: Corrections; each must be an input of the definition or read by a
                node from ``to_node`` on.
            compensate: Undo the saga steps done after ``to_node`` (False leaves them, recorded).
            by: Who asked, recorded beside the reason.

        Returns:
            What the run answered: where it was, where it goes back to, what was undone.

        Raises:
            RewindNotAccepted: The run refused (it ended, it is not waiting, a correction no
                node reads, ...); the one-line reason names the field. Nothing was written.
            DsmoError: ``to_node`` is not a node the run reached, or ``reason`` is empty.
            RunNotFound: No run has this id.
        """
        return await rewinds.rewind(
            self,
            self._trail_store().store,
            run_id,
            to_node,
            reason=reason,
            set_variables=set_variables,
            compensate=compensate,
            by=by,
        )

    async def verify_history(self, run_id: str) -> str | None:
        """Replay the run's Temporal history on this process's workflow code: is it still deterministic?

        Args:
            run_id: The run.

        Returns:
            None if it replays, else what diverged.

        Raises:
            RunNotFound: No run has this id.
        """
        try:
            return await replay.verify_history(self, run_id)
        except RPCError as err:
            raise rpc_error(self.settings, run_id, err) from None

    async def verify_trail(self, run_id: str) -> TrailVerification:
        """Check an ended run's exported trail: its hash chain and, if the run still answers, its content.

        Args:
            run_id: The run.

        Returns:
            ``ok``, the number of lines, the first problem found, and whether the content was
            compared with the run's own trail.

        Raises:
            DsmoError: The run exported no trail (it is written when the run ends), or retention removed it.
        """
        trails = self._trail_store()
        body = await asyncio.to_thread(trails.export, run_id)
        if body is None:
            why = await asyncio.to_thread(trails.missing_export, run_id)
            raise DsmoError(f"no exported audit trail for {run_id!r} ({why})")
        try:
            # The run's own record, from Temporal (needs a worker), not the file being verified.
            head = (await self.trail(run_id)).head
            trail: list[AuditEvent] | None = await self.events(run_id, live=True)
        except DsmoError:
            head, trail = None, None  # the run itself is gone (retention, erasure): the chain alone is checked
        verified = verify_export(body, trail, head)
        if not verified.ok:
            return verified
        erased, record = await asyncio.to_thread(erased_artifacts, trails.store, body)
        return dataclasses.replace(verified, erased=erased, erasure=record)

    async def dead_letters(self, *, run_id: str | None = None) -> list[DeadLetterRow]:
        """The dead letters (stages that could not succeed), oldest first, with what redrove each.

        Args:
            run_id: Only this run's (default: every run's).

        Returns:
            One row per dead letter: its id (``RUN/STAGE``), error type, attempts, when, and the
            run that redrove it, if any.

        Raises:
            botocore.exceptions.BotoCoreError: The object store cannot be reached.
        """
        if run_id is not None:
            check_run_id(run_id)  # it becomes part of an object key prefix
        return await asyncio.to_thread(redrive.list_dead_letters, self._trail_store().store, run_id)

    async def redrive(self, letter_id: str, *, task_queue: str | None = None, new_id: str | None = None) -> str:
        """Reprocess a dead letter from its failed stage as a new linked run (same version, config, variables).

        Args:
            letter_id: ``RUN/STAGE``, as `dead_letters` lists it.
            task_queue: The new run's task queue (default: the failed run's).
            new_id: The new run's id (default: ``RUN.redrive-<random>``). If a run of this id
                exists, it is taken as this letter's redrive (an earlier attempt interrupted
                before it marked the letter): the letter is marked and nothing is started.

        Returns:
            The new run's id.

        Raises:
            DsmoError: No such dead letter, or its config snapshot is of another version.
        """
        return await redrive.redrive(self, self._trail_store().store, letter_id, task_queue=task_queue, new_id=new_id)

    # -- moving runs to another version ----------------------------------------------------

    async def migrate_run(
        self,
        run_id: str,
        to: AgentDefinition | str,
        *,
        node_map: Mapping[str, str] | None = None,
        leave_wait: bool = False,
        restart_timers: bool = False,
        set_variables: Mapping[str, Any] | None = None,
        reason: str = "",
        by: str = "user",
        dry_run: bool = False,
    ) -> MigrationAck:
        """Move one run to another published version of its agent, checked by the run first.

        A waiting run moves at once and goes on waiting at the mapped node; a run inside a stage
        moves at its next node boundary (this call returns once it is decided there).

        Args:
            run_id: The run.
            to: The target version: a published definition, or its hash or ``version`` label.
            node_map: Node ids of the run's version -> the target's, for renamed nodes.
            leave_wait: Let a waiting run leave its wait when the mapped node waits for
                something else (the mapped node then runs from its beginning).
            restart_timers: The wait's timeout starts afresh instead of keeping its deadline.
            set_variables: Variables to set as the run moves (one the target reads, a fix).
            reason: Why, recorded in the run's trail (`RUN_MIGRATED`).
            by: Who asked, recorded beside the reason.
            dry_run: Only check: ask nothing of the run but where it is.

        Returns:
            Where the run goes on: the versions, the node it was at and the one it goes on at.

        Raises:
            AlreadyOnTarget: The run follows ``to`` already (nothing moved).
            MigrationNotAccepted: The move was refused; the one-line reason names the field.
            DefinitionNotFound: ``to`` is not a published version of the run's agent.
            RunClosed: The run has ended.
            RunNotFound: No run has this id.
        """
        if isinstance(to, str):
            to = await migration.resolve_version(self, (await self.status(run_id)).agent, to)
        request = MigrationRequest(
            definition=await migration.published_target(self, to),
            node_map=dict(node_map or {}),
            leave_wait=leave_wait,
            restart_timers=restart_timers,
            set=dict(set_variables or {}),
            requested_by=by,
            reason=reason,
        )
        if dry_run:
            return await migration.preview(self, run_id, request)
        return await migration.send(self, run_id, request)

    async def migrate(
        self,
        agent: str,
        to: AgentDefinition | str,
        *,
        from_version: str | None = None,
        query: str | None = None,
        node_map: Mapping[str, str] | None = None,
        leave_wait: bool = False,
        restart_timers: bool = False,
        set_variables: Mapping[str, Any] | None = None,
        reason: str = "",
        by: str = "user",
        dry_run: bool = False,
        rate: float | None = None,
        limit: int | None = None,
        concurrency: int = 20,
        on_outcome: Callable[[RunOutcome], None] | None = None,
    ) -> BatchReport:
        """Move every open run of ``agent`` that a filter selects to another published version.

        Each run is moved as `migrate_run` moves one, checked by the run itself. Running the same
        batch again moves nothing twice: runs already on the target are ``skipped``, so an
        interrupted batch is finished by running it again.

        Args:
            agent: The agent whose open runs move.
            to: The target version: a published definition, or its hash or ``version`` label.
            from_version: Only runs on this version (hash or label); default: every other version.
            query: A Temporal visibility filter AND-ed to the selection (for example
                ``WaitingFor = 'document'``).
            node_map: Node ids of the runs' version -> the target's, for renamed nodes.
            leave_wait: See `migrate_run`.
            restart_timers: See `migrate_run`.
            set_variables: Variables to set in every run as it moves.
            reason: Why, recorded in each run's trail.
            by: Who asked, recorded beside the reason.
            dry_run: Only check each run (`would` or `refused`); nothing is sent.
            rate: At most this many runs per second.
            limit: At most this many runs.
            concurrency: At most this many runs in flight at once.
            on_outcome: Called with each run's outcome as it is known.

        Returns:
            The report: each run's outcome (``done``, ``would``, ``skipped``, ``refused``,
            ``failed``) and a summary, refusals counted by reason (``to_json()`` for the file).

        Raises:
            DefinitionNotFound: ``to`` or ``from_version`` is not a published version of ``agent``.
            InvalidQuery: Temporal refused the filter; no run was touched.
        """
        target = to if isinstance(to, AgentDefinition) else await migration.resolve_version(self, agent, to)
        if target.agent != agent:
            raise DefinitionNotFound(f"to: version {target.version} is of agent {target.agent!r}, not {agent!r}")
        source = await migration.resolve_version(self, agent, from_version) if from_version else None
        request = MigrationRequest(
            definition=target if dry_run else await migration.published_target(self, target),
            node_map=dict(node_map or {}),
            leave_wait=leave_wait,
            restart_timers=restart_timers,
            set=dict(set_variables or {}),
            requested_by=by,
            reason=reason,
        )
        return await migration.migrate_batch(
            self,
            request,
            from_version=source.workflow_version if source else None,
            query=query,
            dry_run=dry_run,
            rate=rate,
            limit=limit,
            concurrency=concurrency,
            on_outcome=on_outcome,
        )

    # -- many runs at once -------------------------------------------------------------------

    async def bulk_cancel(
        self,
        query: str,
        *,
        reason: str,
        by: str = "user",
        dry_run: bool = False,
        rate: float | None = None,
        limit: int | None = None,
        on_outcome: Callable[[RunOutcome], None] | None = None,
    ) -> BatchReport:
        """Cancel every run a visibility filter selects, each as `cancel` would (reason in its trail,
        its saga compensated).

        Args:
            query: A Temporal visibility filter (AND-ed with ``WorkflowType='AgentExecution'``).
            reason: Why, recorded in each run as `cancelReason`.
            by: Who, recorded as `cancelledBy`.
            dry_run: Send nothing; report ``would`` for each open run.
            rate: At most this many runs per second.
            limit: At most this many runs.
            on_outcome: Called with each run's outcome as it is known.

        Returns:
            One outcome per run: ``done`` (cancel requested; the run unwinds on its own),
            ``skipped`` (already ended, or a cancel was requested before), ``would`` (dry run)
            or ``failed``.

        Raises:
            DsmoError: Temporal refused the filter (``query: <why>``); no run was touched.
        """
        return await bulk_operations.bulk_cancel(
            self, query, reason=reason, by=by, dry_run=dry_run, rate=rate, limit=limit, on_outcome=on_outcome
        )

    async def bulk_redrive(
        self,
        query: str,
        *,
        dry_run: bool = False,
        rate: float | None = None,
        limit: int | None = None,
        on_outcome: Callable[[RunOutcome], None] | None = None,
    ) -> BatchReport:
        """Redrive the dead letters of every failed run a visibility filter selects (see `redrive`).

        Args:
            query: A Temporal visibility filter; only failed runs among those it selects are taken.
            dry_run: Start nothing; report ``would`` with the dead letters of each run.
            rate: At most this many runs per second.
            limit: At most this many runs.
            on_outcome: Called with each run's outcome as it is known.

        Returns:
            One outcome per failed run: ``done`` (``detail["redrivenAs"]`` names the new runs),
            ``skipped`` (no dead letter, or already redriven: named), ``would`` or ``failed``.

        Raises:
            DsmoError: Temporal refused the filter (``query: <why>``); no run was touched.
        """
        return await bulk_operations.bulk_redrive(
            self, query, dry_run=dry_run, rate=rate, limit=limit, on_outcome=on_outcome
        )

    async def bulk_deliver(
        self,
        query: str,
        event_type: str,
        data: dict[str, Any],
        *,
        batch_id: str,
        dry_run: bool = False,
        rate: float | None = None,
        limit: int | None = None,
        on_outcome: Callable[[RunOutcome], None] | None = None,
    ) -> BatchReport:
        """Deliver one resume event to every run a visibility filter selects, each as `deliver_event` would.

        Each run's event id is derived from ``batch_id`` and the run id (``BATCH:RUN``, hashed if
        too long), so running the same batch again delivers nothing twice: a run that took the
        event (its trail says so) is ``skipped`` and nothing is written to it.

        Args:
            query: A Temporal visibility filter (AND-ed with ``WorkflowType='AgentExecution'``).
            event_type: The resume event kind (`EVENT_COMPLETED`, `MESSAGE_RECEIVED`, ...).
            data: The event's data, the same for every run.
            batch_id: The batch's id: the same id again is the same batch.
            dry_run: Send nothing; report ``would`` for each open run that has not taken the
                event (whether the run would accept it is its own judgement, known only on delivery).
            rate: At most this many runs per second.
            limit: At most this many runs.
            on_outcome: Called with each run's outcome as it is known.

        Returns:
            One outcome per run: ``done`` (taken or kept for a wait ahead), ``skipped`` (already
            delivered, or ended), ``refused`` (the run's reason), ``would`` or ``failed``.

        Raises:
            EventMalformed: The event is not well formed; nothing was sent to any run.
            DsmoError: Temporal refused the filter (``query: <why>``); no run was touched.
        """
        return await bulk_operations.bulk_deliver(
            self,
            query,
            event_type,
            data,
            batch_id=batch_id,
            dry_run=dry_run,
            rate=rate,
            limit=limit,
            on_outcome=on_outcome,
        )

    # -- events -----------------------------------------------------------------------------

    async def deliver_event(
        self, run_id: str, event_type: str, data: dict[str, Any], *, event_id: str | None = None
    ) -> EventAck:
        """Deliver a resume event through the validated `deliver_event` update.

        Args:
            run_id: The run.
            event_type: One of the resume event kinds (`MESSAGE_RECEIVED`, `DOCUMENT_UPLOADED`, ...).
            data: The event's data.
            event_id: Deduplication id (a random one if omitted).

        Returns:
            Whether it was applied, a duplicate, and the run's status.

        Raises:
            EventMalformed: The event is not well formed; it was not sent (an EventNotAccepted).
            EventNotAccepted: The run refused it; nothing was written to its history.
            RunNotFound: No run has this id.
            RunClosed: The run has ended.
            WorkflowTaskFailing: The run's workflow task keeps failing, so it cannot take the
                event now (said within seconds, naming the failure).
        """
        event_id = event_id or str(uuid.uuid4())
        check_event(event_type, event_id, data)
        event = {"type": event_type, "event_id": event_id, "data": data}
        try:
            with tracer.start_as_current_span(
                f"dsmo.event {event_type}", context=await self._run_trace(run_id), attributes={"dsmo.run_id": run_id}
            ):
                ack = await update_run(self.temporal, self._handle(run_id), "deliver_event", event, EventAck)
            return ack
        except WorkflowTaskFailing as err:
            raise not_taken(err, event_type) from None
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type == DUPLICATE_NOT_RECORDED:
                status = str(cause.details[0]) if cause.details else "unknown"
                return EventAck(event_id=event_id, accepted=False, duplicate=True, status=status, detail=cause.message)
            raise EventNotAccepted(f"{event_type} rejected: {update_failure(err)}") from None
        except RPCError as err:
            if "workflow task in failed state" in str(err).lower():  # failing before the watch looked
                raise not_taken(
                    await query_error(self.temporal, self.settings, self._handle(run_id), "deliver_event", err),
                    event_type,
                ) from None
            problem = await closed_or_missing(self.settings, self._handle(run_id), err)
            if isinstance(problem, RunClosed) and await self._applied_before(run_id, event_id):
                # A retry of an event the run already took: idempotent, even after the run ended.
                return EventAck(event_id=event_id, accepted=False, duplicate=True, status="ended")
            raise problem from None

    async def respond(self, run_id: str, text: str, *, event_id: str | None = None) -> EventAck:
        """Deliver a person's reply (`MESSAGE_RECEIVED`) to a run waiting for a response.

        Args:
            run_id: The run.
            text: The reply.
            event_id: Deduplication id; the same id again is acknowledged as a duplicate.

        Returns:
            What became of the event.

        Raises:
            EventNotAccepted: The run is not waiting for a response.
        """
        return await self.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": text}, event_id=event_id)

    async def signal_event(self, run_id: str, event_type: str, payload: dict[str, Any]) -> None:
        """Send a resume event as a Temporal signal: fire-and-forget, no answer.

        The run records the event as applied, duplicate or rejected (`EVENT_REJECTED`). Prefer
        `deliver_event`, which answers; signals are what other Temporal clients can send.

        Args:
            run_id: The run.
            event_type: One of the resume event kinds (the signal's name).
            payload: The event's data, with its ``event_id`` (required: the run deduplicates by it).

        Raises:
            EventMalformed: The event is not well formed; it is refused before it reaches the run.
            RunNotFound: No run has this id.
        """
        try:
            parse_signal(event_type, payload)  # well_formed, as the run's signal handler asks it
        except EventRejected as problem:
            raise EventMalformed(f"{event_type} rejected: {problem}", problem) from None
        try:
            await self._handle(run_id).signal(event_type, payload)
        except RPCError as err:
            raise rpc_error(self.settings, run_id, err) from None

    # -- helpers ----------------------------------------------------------------------------

    async def _run_trace(self, run_id: str) -> Any:
        """The trace the run started in (from its memo), so events extend it; empty if unknown."""
        if not tracing_enabled():
            # The event's span would be a no-op: skip the describe call that looks up the run's
            # trace (a round trip before every event from a process that did not start the run).
            return None
        carrier = self._run_traces.get(run_id)
        if carrier is None:
            try:
                memo = await (await self._handle(run_id).describe()).memo()
            except (RPCError, ValueError, TypeError):
                return None
            found = memo.get("trace")
            carrier = found if isinstance(found, dict) else {}
            self._remember_trace(run_id, carrier)
        return context_from(carrier) if carrier else None

    def _remember_trace(self, run_id: str, carrier: dict[str, str]) -> None:
        self._run_traces[run_id] = carrier
        if len(self._run_traces) > TRACE_CACHE_RUNS:
            self._run_traces.popitem(last=False)

    def _handle(self, run_id: str) -> WorkflowHandle[Any, Any]:
        check_run_id(run_id)  # a malformed id is named as such, not reported as "not found"
        return self.temporal.get_workflow_handle(run_id)

    async def _query(self, run_id: str, name: str, result_type: Any) -> Any:
        try:
            return await self._handle(run_id).query(name, result_type=result_type, rpc_timeout=QUERY_TIMEOUT)
        except RPCError as err:
            if "not scheduled yet" in str(err) or "first workflow task" in str(err).lower():
                raise RunNotStarted(f"run {run_id!r} has not started yet") from None
            raise await query_error(self.temporal, self.settings, self._handle(run_id), name, err) from None
        except WorkflowQueryFailedError as err:
            raise DsmoError(f"run {run_id}: query {name} failed: {err}") from None

    async def _applied_before(self, run_id: str, event_id: str) -> bool:
        try:
            trail = await self.events(run_id)
        except DsmoError:
            return False
        return any(e.data.get("eventId") == event_id and e.type in ("RUN_RESUMED", "EVENT_RECEIVED") for e in trail)


def _priority(priority: int | None) -> int | None:
    """A start's priority, checked: 1 (highest) to 5, or None."""
    if priority is not None and (isinstance(priority, bool) or not 1 <= priority <= 5):
        raise ValueError(f"priority: {priority!r} is not 1 (highest) to 5")
    return priority
