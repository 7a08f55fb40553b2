"""AgentExecution: the orchestrator. It alone decides what happens next in a run."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows import contracts
    from workflows import search_attributes as sa
    from workflows.actions import NodeActions, failure_message, raise_if_cancelled
    from workflows.audit import AuditTrail
    from workflows.control import ContinueAsNewDue, RouteTo, RunEnded, ServiceFailed
    from workflows.definition import AgentDefinition, effective_parameters
    from workflows.endings import STRICT_RUN_ID_PATCH, RunEndings
    from workflows.errors import TemplateError
    from workflows.events import (
        DUPLICATE_NOT_RECORDED,
        EVENT_KINDS,
        EventAck,
        EventRejected,
        parse_signal,
        parse_update,
        strict_event_problem,
    )
    from workflows.identifiers import run_id_problem
    from workflows.metrics import count_event
    from workflows.nodes import (
        AssignTestNode,
        DelayNode,
        InvokeNode,
        RequestDocumentNode,
        RequestSignatureNode,
        RunAgentNode,
        SendMessageNode,
        TriggerAgentNode,
        WaitForEventNode,
        WaitForResponseNode,
        WaitOptions,
    )
    from workflows.records import AuditEvent, Checkpoint, ExecutionRequest, ExecutionResult, StatusView, WaitCheckpoint
    from workflows.routing import Routing
    from workflows.run_state import RunState
    from workflows.saga import Compensation
    from workflows.service_budgets import ATTEMPT_TIMEOUT, BUDGETS, budget_spent, record_service_failure
    from workflows.stages import StageActions
    from workflows.status import RunStatus
    from workflows.templating import render, render_values

# workflow.patched ids: each names a change to what running executions do.
EVENT_SIZE_CAP_PATCH = "event-size-cap"
# Raw signals are held to the same event-id and shape rules as every other way in; the marker
# is written only when a signal is refused by them, so runs that never meet one are unchanged.
STRICT_SIGNALS_PATCH = "strict-signals"
# Duplicate updates after this many recorded ones are answered by the validator, which writes
# nothing to history: a sender retrying in a loop cannot grow the run's history without bound.
DUPLICATES_RECORDED_MAX = 10


@workflow.defn(name="AgentExecution")
class AgentExecution(RunEndings, Routing, StageActions, NodeActions):
    @workflow.init
    def __init__(self, request: ExecutionRequest) -> None:
        info = workflow.info()
        definition = request.definition
        checkpoint = request.checkpoint
        self._definition: AgentDefinition = definition
        self._request = request
        self._correlation_id = request.correlation_id or info.workflow_id
        self._input_uri = checkpoint.input_uri if checkpoint else None
        # The input artifact is written from request.input (by the starter or by _prepare) and a
        # continued run carries the same request: the two are the same document.
        self._input_document = contracts.inline_input(request.input)
        self._step = checkpoint.step if checkpoint else 0
        self._slot_held = checkpoint.slot_held if checkpoint else False
        self._slot_granted = self._slot_held
        self._visits: dict[str, int] = dict(checkpoint.visits) if checkpoint else {}
        self._committed: set[str] = set(checkpoint.committed) if checkpoint else set()
        self._routed_to_fail_safe = checkpoint.routed_to_fail_safe if checkpoint else False
        self._replayed = 0
        self._actions_replayed = 0
        self._saga: list[Compensation] = [Compensation.model_validate(c) for c in checkpoint.saga] if checkpoint else []
        version = definition.workflow_version  # a hash of the canonical definition: computed once
        self._state = RunState(
            run_id=info.workflow_id,
            agent=definition.agent,
            workflow_version=version,
            started_at=checkpoint.started_at if checkpoint else info.start_time,
            variables=dict(checkpoint.variables if checkpoint else request.input),
            audit=AuditTrail(
                info.workflow_id,
                version,
                definition.audit_level,
                on_record=lambda event: count_event(event, replay_of=request.replay.of if request.replay else None),
            ),
        )
        started_with = info.typed_search_attributes
        self._state.identity_unpublished = (
            started_with.get(sa.AGENT_NAME) is None or started_with.get(sa.WORKFLOW_VERSION) is None
        )
        if checkpoint:
            self._state.audit.events = list(checkpoint.audit)
            self._state.seen_event_ids = set(checkpoint.seen_event_ids)
            self._state.path = list(checkpoint.path)
            self._state.config_ref = checkpoint.config_ref

    @workflow.run
    async def run(self, request: ExecutionRequest) -> ExecutionResult:
        state = self._state
        checkpoint = request.checkpoint
        try:
            if checkpoint is None:
                await self._begin()
                node_id: str | None = request.start_at or self._definition.start
            else:
                state.status = RunStatus.RUNNING
                state.audit.record(
                    "RUN_CONTINUED",
                    at=workflow.now(),
                    stage=checkpoint.node,
                    data={"generation": checkpoint.generation},
                )
                node_id = checkpoint.node
                if checkpoint.wait is not None and node_id is not None:
                    node_id = await self._step_from(node_id, resume=checkpoint.wait)
            while node_id is not None:
                if self._continue_as_new_due():
                    raise ContinueAsNewDue(node_id)
                node_id = await self._step_from(node_id)
        except RunEnded as ended:
            return await self._finish_early(ended)
        except ServiceFailed as failed:
            return await self._finish_early(await self._service_failed(failed))
        except ContinueAsNewDue as due:
            await self._continue_as_new(due)
        except asyncio.CancelledError:
            return await self._finish_cancelled()
        return await self._finish_completed()

    async def _step_from(self, node_id: str, *, resume: WaitCheckpoint | None = None) -> str | None:
        """Run one node and pick the next; a contract violation reroutes to the fail-safe node."""
        try:
            node = await self._execute(node_id, resume=resume)
            return self._next_node(node_id, node)
        except RouteTo as route:
            workflow.logger.warning("Execution %s routed to %s: %s", self._state.run_id, route.node, route.reason)
            return route.node

    async def _begin(self) -> None:
        state = self._state
        request = self._request
        state.audit.record(
            "RUN_CREATED",
            at=workflow.now(),
            data={
                "agent": state.agent,
                "version": self._definition.version,
                "correlationId": self._correlation_id,
                **({"parentRunId": request.parent_run_id} if request.parent_run_id else {}),
                **request.origin,
                **({"startAt": request.start_at} if request.start_at else {}),
            },
        )
        workflow.logger.info("Starting execution %s (%s@%s)", state.run_id, state.agent, state.workflow_version)
        if request.prepared is None:
            # A starter that is not DSMO's may not have set the start search attributes.
            state.publish()
        problem = run_id_problem(state.run_id)
        if problem and workflow.patched(STRICT_RUN_ID_PATCH):
            # Started around DSMO's checks (e.g. `temporal workflow start --workflow-id $'x\n'`): no
            # object key can be built from this id, so nothing is written and the run ends here.
            state.enter(RunStatus.RUNNING)
            raise RunEnded(RunStatus.FAILED, "", problem)
        limit = self._definition.rate_limit
        if limit is not None:
            # PENDING while queued behind the agent's concurrency limit.
            state.pending_reason = f"queued: agent {state.agent} allows {limit.max_concurrent} concurrent runs"
            await self._slot_activity(contracts.REQUEST_SLOT, limit.max_concurrent)
            self._slot_held = True
            await workflow.wait_condition(lambda: self._slot_granted)
        # A DSMO starter starts a run it prepared, with no delay and no rate limit, as `running`
        # (see DsmoClient._start_status): the value is in the start event, so this is decided
        # the same way on replay, and runs started `pending` (all older ones) upsert as before.
        started_running = (
            workflow.info().typed_search_attributes.get(sa.AGENT_EXECUTION_STATUS) == RunStatus.RUNNING.value
        )
        state.enter(RunStatus.RUNNING, published=request.prepared is not None and started_running)
        if request.prepared is None:
            prepared = await self._prepare()
        else:
            prepared = request.prepared
            # Yield once, as awaiting the preparation did: a cancel requested before the run
            # started ends it here, before its first node does anything.
            await asyncio.sleep(0)
        self._input_uri, state.config_ref = prepared.input_uri, prepared.config_ref
        state.variables.setdefault("stages", {})

    async def _prepare(self) -> contracts.PreparedRun:
        """Write the input artifact and config snapshot when the starter did not (see ExecutionRequest)."""
        state, definition = self._state, self._definition
        snapshot = contracts.PrepareRun(
            run_id=state.run_id,
            workflow_version=state.workflow_version,
            input=state.variables,
            definition=definition.model_dump(mode="json", exclude_none=True),
            effective=effective_parameters(definition),
        )
        budget = BUDGETS[contracts.PREPARE_RUN]
        try:
            # Local: two small write-once puts need no round trip through a task queue.
            prepared: contracts.PreparedRun = await workflow.execute_local_activity(
                contracts.PREPARE_RUN,
                snapshot,
                result_type=contracts.PreparedRun,
                start_to_close_timeout=ATTEMPT_TIMEOUT,
                schedule_to_close_timeout=budget.total,
                retry_policy=budget.retry_policy,
            )
        except ActivityError as err:
            raise_if_cancelled(err)
            if not budget_spent(err):  # refused by the store (a contradicting snapshot): no retry helps
                raise RunEnded(RunStatus.FAILED, "", f"preparing the run failed: {failure_message(err)}") from None
            raise ServiceFailed(contracts.PREPARE_RUN, record_service_failure(state, budget, err, stage=None)) from None
        return prepared

    # -- messages in ------------------------------------------------------------------------

    @workflow.signal(name="MESSAGE_RECEIVED")
    def message_received(self, payload: Any = None) -> None:
        self._on_signal("MESSAGE_RECEIVED", payload)

    @workflow.signal(name="DOCUMENT_UPLOADED")
    def document_uploaded(self, payload: Any = None) -> None:
        self._on_signal("DOCUMENT_UPLOADED", payload)

    @workflow.signal(name="SIGNATURE_COMPLETED")
    def signature_completed(self, payload: Any = None) -> None:
        self._on_signal("SIGNATURE_COMPLETED", payload)

    @workflow.signal(name="TEST_COMPLETED")
    def test_completed(self, payload: Any = None) -> None:
        self._on_signal("TEST_COMPLETED", payload)

    @workflow.signal(name="EVENT_COMPLETED")
    def event_completed(self, payload: Any = None) -> None:
        self._on_signal("EVENT_COMPLETED", payload)

    @workflow.signal(name="SLOT_GRANTED")
    def slot_granted(self, payload: Any = None) -> None:
        self._slot_granted = True

    @workflow.update(name="deliver_event")
    def deliver_event(self, event: Any) -> EventAck:
        # The validator applied the strict rules to new updates; the handler also replays updates
        # accepted before those rules existed, so it does not apply them again.
        return self._state.apply_event(parse_update(event, strict=False), via="update")

    @deliver_event.validator
    def _validate_event(self, event: Any) -> None:
        # Runs before anything is written to history; raising here rejects the update.
        try:
            parsed = parse_update(event)
            self._state.check_event(parsed)
        except EventRejected as err:
            raise ApplicationError(str(err), type="EventRejected", non_retryable=True) from None
        state = self._state
        if parsed.event_id in state.seen_event_ids and state.duplicates_recorded >= DUPLICATES_RECORDED_MAX:
            raise ApplicationError(
                f"event {parsed.event_id!r} was applied already; duplicate not recorded "
                f"({DUPLICATES_RECORDED_MAX} duplicates recorded)",
                state.status.value,
                type=DUPLICATE_NOT_RECORDED,
                non_retryable=True,
            )

    @workflow.query(name="status")
    def status(self) -> StatusView:
        return self._state.view()

    @workflow.query(name="variables")
    def variables(self) -> dict[str, Any]:
        return self._state.variables

    @workflow.query(name="events")
    def events(self) -> list[AuditEvent]:
        return self._state.audit.events

    def _on_signal(self, event_type: str, payload: Any) -> None:
        # A bad signal never crashes or blocks the run: it is recorded as rejected.
        assert event_type in EVENT_KINDS
        try:
            # Runs that applied a bigger signal before the size cap existed must replay as they ran.
            capped = workflow.patched(EVENT_SIZE_CAP_PATCH)
            event = parse_signal(event_type, payload, size_cap=capped, strict=False)
            problem = strict_event_problem(event_type, payload)
            if problem and workflow.patched(STRICT_SIGNALS_PATCH):
                raise EventRejected(problem)
            self._state.apply_event(event, via="signal")
        except EventRejected as err:
            event_id = payload.get("event_id") if isinstance(payload, dict) else None
            self._state.reject(event_type, str(err), via="signal", event_id=event_id)
            workflow.logger.warning("Rejected %s for %s: %s", event_type, self._state.run_id, err)

    # -- nodes ------------------------------------------------------------------------------

    async def _execute(self, node_id: str, *, resume: WaitCheckpoint | None = None) -> Any:
        node = self._definition.nodes[node_id]
        state = self._state
        if resume is None:
            self._step += 1
            state.path.append(node_id)
        state.current_node = node_id
        workflow.logger.info("Action %d: %s (%s) - starting", self._step, node.action_type, node_id)
        try:
            await self._dispatch(node_id, node, resume)
        except TemplateError as err:
            raise RunEnded(RunStatus.FAILED, node_id, f"{node_id}: {err}") from None
        workflow.logger.info("Action %d: %s (%s) - completed", self._step, node.action_type, node_id)
        return node

    async def _dispatch(self, node_id: str, node: Any, resume: WaitCheckpoint | None) -> None:
        if isinstance(node, RunAgentNode):
            await self._run_agent(node_id, node)
        elif isinstance(node, SendMessageNode):
            await self._send_message(node_id, node.parameters)
        elif isinstance(node, WaitForResponseNode):
            reply = node.parameters
            data = {k: v for k, v in (("expectedFrom", reply.expected_from), ("threadId", reply.thread_id)) if v}
            await self._await_event(node_id, "response", reply, data, resume=resume)
        elif isinstance(node, RequestDocumentNode):
            docs = node.parameters
            await self._request_and_wait(
                node_id, "document", docs, {"documents": list(docs.documents)}, resume, requested=list(docs.documents)
            )
        elif isinstance(node, RequestSignatureNode):
            sign = node.parameters
            await self._request_and_wait(node_id, "signature", sign, {"document": sign.document}, resume)
        elif isinstance(node, AssignTestNode):
            await self._request_and_wait(node_id, "test", node.parameters, {"test": node.parameters.test}, resume)
        elif isinstance(node, WaitForEventNode):
            event = node.parameters
            details = {"event": render(event.event, self._state.variables)}
            await self._await_event(
                node_id, "event", event, details | ({"title": event.title} if event.title else {}), resume=resume
            )
        elif isinstance(node, DelayNode):
            await self._delay(node_id, node.parameters, resume)
        elif isinstance(node, TriggerAgentNode):
            await self._trigger_agent(node_id, node.parameters)
        elif isinstance(node, InvokeNode):
            await self._invoke(node_id, node)

    async def _request_and_wait(
        self,
        node_id: str,
        kind: str,
        params: WaitOptions,
        details: dict[str, Any],
        resume: WaitCheckpoint | None,
        *,
        requested: list[str] | None = None,
    ) -> None:
        """Send the request (documents, signature, test) once, then wait for its completion event."""
        details = render_values(details, self._state.variables)
        data: dict[str, Any] = dict(details)
        if resume is None:
            data["requestId"] = await self._send_request(node_id, kind, params, details)
        await self._await_event(node_id, kind, params, data, requested=requested, resume=resume)

    # -- continue-as-new --------------------------------------------------------------------

    def _continue_as_new_due(self) -> bool:
        info = workflow.info()
        return info.is_continue_as_new_suggested() or info.get_current_history_length() >= self._request.history_limit

    async def _continue_as_new(self, due: ContinueAsNewDue) -> None:
        state = self._state
        await workflow.wait_condition(workflow.all_handlers_finished)
        previous = self._request.checkpoint
        checkpoint = Checkpoint(
            node=due.node,
            step=self._step,
            variables=state.variables,
            seen_event_ids=sorted(state.seen_event_ids),
            audit=state.audit.events,
            input_uri=self._input_uri,
            wait=due.wait,
            generation=(previous.generation + 1) if previous else 2,
            slot_held=self._slot_held,
            started_at=state.started_at,
            path=state.path,
            visits=self._visits,
            committed=sorted(self._committed),
            config_ref=state.config_ref,
            routed_to_fail_safe=self._routed_to_fail_safe,
            saga=[entry.model_dump(mode="json") for entry in self._saga],
        )
        workflow.logger.info("Execution %s continues as new (generation %d)", state.run_id, checkpoint.generation)
        workflow.continue_as_new(self._request.model_copy(update={"checkpoint": checkpoint}))
