"""AgentExecution: the orchestrator. It alone decides what happens next in a run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from workflows import contracts
    from workflows.audit import AuditTrail
    from workflows.definition import (
        AgentDefinition,
        RunAgentNode,
        SendMessageNode,
        SendMessageParams,
        WaitForResponseNode,
    )
    from workflows.durations import format_duration
    from workflows.errors import TemplateError
    from workflows.events import EventAck, EventRejected, parse_signal, parse_update
    from workflows.records import AuditEvent, ExecutionRequest, ExecutionResult, StatusView
    from workflows.run_state import RunState, Waiting
    from workflows.status import RunStatus
    from workflows.templating import render

# Bookkeeping activities (input snapshot, messaging) retry on their own; stages use the node's policy.
SERVICE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))
PERMANENT_ERRORS = ["ContractViolation", "InvalidInput", "UnknownAgent", "MissingArtifact"]


class _RunEnded(Exception):
    """Internal: a node ended the run early (never leaves the workflow as this type)."""

    def __init__(self, status: RunStatus, node: str, message: str) -> None:
        super().__init__(message)
        self.status, self.node, self.message = status, node, message


@workflow.defn(name="AgentExecution")
class AgentExecution:
    @workflow.init
    def __init__(self, request: ExecutionRequest) -> None:
        info = workflow.info()
        definition = request.definition
        self._definition: AgentDefinition = definition
        self._correlation_id = request.correlation_id or info.workflow_id
        self._input_uri: str | None = None
        self._step = 0
        self._state = RunState(
            run_id=info.workflow_id,
            agent=definition.agent,
            workflow_version=definition.workflow_version,
            started_at=info.start_time,
            variables=dict(request.input),
            audit=AuditTrail(info.workflow_id, definition.workflow_version),
        )

    @workflow.run
    async def run(self, request: ExecutionRequest) -> ExecutionResult:
        state = self._state
        state.enter(RunStatus.RUNNING)
        state.audit.record(
            "RUN_CREATED",
            at=workflow.now(),
            data={"agent": state.agent, "version": self._definition.version, "correlationId": self._correlation_id},
        )
        workflow.logger.info("Starting execution %s (%s@%s)", state.run_id, state.agent, state.workflow_version)
        self._input_uri = await workflow.execute_activity(
            contracts.STORE_RUN_INPUT,
            contracts.StoreRunInput(run_id=state.run_id, workflow_version=state.workflow_version, input=request.input),
            result_type=str,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=SERVICE_RETRY,
        )
        node_id: str | None = self._definition.start
        try:
            while node_id is not None:
                node_id = await self._execute(node_id)
        except _RunEnded as ended:
            return await self._finish_early(ended)
        return await self._finish_completed()

    # -- messages in ------------------------------------------------------------------------

    @workflow.signal(name="MESSAGE_RECEIVED")
    def message_received(self, payload: Any = None) -> None:
        self._on_signal("MESSAGE_RECEIVED", payload)

    @workflow.update(name="deliver_event")
    def deliver_event(self, event: Any) -> EventAck:
        return self._state.apply_event(parse_update(event), via="update")

    @deliver_event.validator
    def _validate_event(self, event: Any) -> None:
        # Runs before anything is written to history; raising here rejects the update.
        try:
            self._state.check_event(parse_update(event))
        except EventRejected as err:
            raise ApplicationError(str(err), type="EventRejected", non_retryable=True) from None

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
        try:
            self._state.apply_event(parse_signal(event_type, payload), via="signal")
        except EventRejected as err:
            event_id = payload.get("event_id") if isinstance(payload, dict) else None
            self._state.reject(event_type, str(err), via="signal", event_id=event_id)
            workflow.logger.warning("Rejected %s for %s: %s", event_type, self._state.run_id, err)

    # -- nodes ------------------------------------------------------------------------------

    async def _execute(self, node_id: str) -> str | None:
        node = self._definition.nodes[node_id]
        self._step += 1
        self._state.current_node = node_id
        workflow.logger.info("Action %d: %s (%s) - starting", self._step, node.action_type, node_id)
        try:
            if isinstance(node, RunAgentNode):
                await self._run_agent(node_id, node)
            elif isinstance(node, SendMessageNode):
                await self._send_message(node_id, node.parameters)
            elif isinstance(node, WaitForResponseNode):
                await self._wait_for_response(node_id, node)
        except TemplateError as err:
            raise _RunEnded(RunStatus.FAILED, node_id, f"{node_id}: {err}") from None
        workflow.logger.info("Action %d: %s (%s) - completed", self._step, node.action_type, node_id)
        return node.next

    async def _run_agent(self, node_id: str, node: RunAgentNode) -> None:
        state = self._state
        input_uri = render(node.input, state.variables) if node.input else self._input_uri
        assert input_uri is not None
        task = contracts.StageTask(
            run_id=state.run_id,
            correlation_id=self._correlation_id,
            stage=node_id,
            workflow_version=state.workflow_version,
            agent=node.agent,
            agent_version=node.agent_version,
            artifact_in_uri=input_uri,
            idempotency_key=contracts.idempotency_key(state.run_id, node_id, state.workflow_version),
            created_at=workflow.now(),
        )
        state.audit.record(
            "STAGE_ENQUEUED",
            at=task.created_at,
            stage=node_id,
            artifact_uris=[input_uri],
            data={"agent": node.agent, "idempotencyKey": task.idempotency_key},
        )
        retry = node.retry
        try:
            summary = await workflow.execute_activity(
                contracts.RUN_STAGE,
                task,
                result_type=contracts.StageSummary,
                start_to_close_timeout=node.timeout,
                retry_policy=RetryPolicy(
                    maximum_attempts=retry.max_attempts,
                    initial_interval=retry.initial_interval,
                    backoff_coefficient=retry.backoff_coefficient,
                    maximum_interval=retry.maximum_interval,
                    non_retryable_error_types=PERMANENT_ERRORS,
                ),
                summary=f"{node_id}: {node.agent}",
            )
        except ActivityError as err:
            reason = _failure_message(err)
            state.audit.record("STAGE_FAILED", at=workflow.now(), stage=node_id, data={"error": reason})
            raise _RunEnded(RunStatus.FAILED, node_id, f"stage {node_id} ({node.agent}) failed: {reason}") from None
        common = {"stage": node_id, "attempt": summary.attempt, "agent_version": summary.agent_version}
        state.audit.record("STAGE_STARTED", at=summary.started_at, artifact_uris=[input_uri], **common)
        state.audit.record(
            "STAGE_SUCCEEDED",
            at=summary.finished_at,
            artifact_uris=[summary.artifact_out_uri],
            data={"summary": summary.summary, "outputSha256": summary.output_sha256, "reused": summary.reused},
            **common,
        )
        state.variables.setdefault("stages", {})[node_id] = {
            "outputUri": summary.artifact_out_uri,
            "summary": summary.summary,
            "attempt": summary.attempt,
            "agentVersion": summary.agent_version,
        }

    async def _send_message(self, node_id: str, params: SendMessageParams) -> None:
        state = self._state
        request = contracts.SendMessageRequest(
            run_id=state.run_id,
            node=node_id,
            message=render(params.message, state.variables),
            to=render(params.to, state.variables) if params.to else None,
            channel=params.channel,
            idempotency_key=contracts.idempotency_key(state.run_id, node_id, state.workflow_version, str(self._step)),
        )
        try:
            sent = await workflow.execute_activity(
                contracts.SEND_MESSAGE,
                request,
                result_type=contracts.SentMessage,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=5, non_retryable_error_types=PERMANENT_ERRORS),
                summary=f"{node_id}: send_message",
            )
        except ActivityError as err:
            raise _RunEnded(
                RunStatus.FAILED, node_id, f"send_message {node_id} failed: {_failure_message(err)}"
            ) from None
        state.audit.record(
            "ACTION_COMPLETED",
            at=workflow.now(),
            stage=node_id,
            data={"actionType": "send_message", "messageId": sent.message_id, "channel": sent.channel},
        )

    async def _wait_for_response(self, node_id: str, node: WaitForResponseNode) -> None:
        state, params = self._state, node.parameters
        for attempt in range(1, params.max_retries + 2):
            data: dict[str, Any] = {"timeout": format_duration(params.timeout), "attempt": attempt}
            if params.expected_from:
                data["expectedFrom"] = params.expected_from
            if params.thread_id is not None:
                data["threadId"] = params.thread_id
            state.begin_wait(Waiting("response", node_id, workflow.now() + params.timeout, data))
            workflow.logger.info("Execution %s entering WAITING state (waitingFor: response)", state.run_id)
            try:
                await workflow.wait_condition(lambda: state.resume_event is not None, timeout=params.timeout)
            except TimeoutError:
                timed_out = True
            else:
                timed_out = False
            if not timed_out:
                event = state.resume_event
                assert event is not None
                state.variables["lastResponse"] = event.data["text"]
                state.enter(RunStatus.RUNNING)
                state.audit.record(
                    "RUN_RESUMED",
                    at=workflow.now(),
                    stage=node_id,
                    data={"eventType": event.type, "eventId": event.event_id},
                )
                workflow.logger.info("Resuming execution %s", state.run_id)
                return
            retry_left = params.on_timeout == "retry" and attempt <= params.max_retries
            if params.on_timeout == "continue" or retry_left:
                state.enter(RunStatus.RUNNING)
                state.audit.record("RUN_RESUMED", at=workflow.now(), stage=node_id, data={"timeout": True})
            for index, action in enumerate(params.timeout_actions):
                await self._send_message(f"{node_id}.timeoutActions.{index}", action.parameters)
            if params.on_timeout == "continue":
                return
            if not retry_left:
                raise _RunEnded(RunStatus.TIMEOUT, node_id, "Timeout waiting for the user's response")

    # -- endings ----------------------------------------------------------------------------

    async def _finish_completed(self) -> ExecutionResult:
        state = self._state
        state.current_node = None
        result = ExecutionResult(
            run_id=state.run_id,
            status=RunStatus.COMPLETED,
            completed_at=workflow.now(),
            result_type="success",
            result_summary="Flow completed successfully",
            variables=state.variables,
        )
        await self._settle(RunStatus.COMPLETED, result, "RUN_COMPLETED")
        workflow.logger.info("Execution %s completed with result: success", state.run_id)
        return result

    async def _finish_early(self, ended: _RunEnded) -> ExecutionResult:
        state = self._state
        if ended.status is RunStatus.TIMEOUT:
            result = ExecutionResult(
                run_id=state.run_id,
                status=RunStatus.TIMEOUT,
                completed_at=workflow.now(),
                result_type="timeout",
                result_summary=ended.message,
                failed_action_id=ended.node,
                variables=state.variables,
            )
        else:
            result = ExecutionResult(
                run_id=state.run_id,
                status=RunStatus.FAILED,
                completed_at=workflow.now(),
                result_type="failure",
                error_message=ended.message,
                failed_action_id=ended.node,
                variables=state.variables,
            )
        await self._settle(ended.status, result, "RUN_ABORTED")
        workflow.logger.info("Execution %s ended: %s (%s)", state.run_id, ended.status, ended.message)
        # Failed and timed-out runs end as Failed in Temporal too, carrying the seed's record.
        raise ApplicationError(
            ended.message,
            result.model_dump(mode="json"),
            type="AgentExecutionTimeout" if ended.status is RunStatus.TIMEOUT else "AgentExecutionFailed",
            non_retryable=True,
        )

    async def _settle(self, status: RunStatus, result: ExecutionResult, event: str) -> None:
        state = self._state
        state.result = result
        state.enter(status)
        state.audit.record(
            "RUN_COMPLETED" if event == "RUN_COMPLETED" else "RUN_ABORTED",
            at=result.completed_at,
            stage=result.failed_action_id,
            data={"status": status.value, "resultType": result.result_type},
        )
        # In-flight update handlers would be lost if the run returned under them.
        await workflow.wait_condition(workflow.all_handlers_finished)


def _failure_message(err: ActivityError) -> str:
    """The innermost failure's message: what the activity said, not Temporal's wrapper."""
    cause: BaseException | None = err.cause
    while isinstance(cause, FailureError) and not isinstance(cause, ApplicationError) and cause.cause is not None:
        cause = cause.cause
    return str(cause or err)
