"""The actions of the seed, as the orchestrator runs them: stages, messages, requests, children."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, ChildWorkflowError, FailureError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from workflows import contracts
    from workflows import search_attributes as sa
    from workflows.control import RunEnded
    from workflows.definition import AgentDefinition
    from workflows.durations import format_duration
    from workflows.nodes import SendMessageParams, TriggerAgentParams
    from workflows.records import ExecutionRequest, ExecutionResult
    from workflows.run_state import RunState, Waiting
    from workflows.status import RunStatus
    from workflows.templating import render, render_values
    from workflows.waits import WaitActions

PERMANENT_ERRORS = ["ContractViolation", "InvalidInput", "UnknownAgent", "MissingArtifact"]
MESSAGING_RETRY = RetryPolicy(maximum_attempts=5, non_retryable_error_types=PERMANENT_ERRORS)


class NodeActions(WaitActions):
    """Mixed into AgentExecution: messages, requests and child agents."""

    _state: RunState
    _request: ExecutionRequest
    _correlation_id: str
    _input_uri: str | None
    _step: int

    def _key(self, node_id: str) -> str:
        state = self._state
        return contracts.idempotency_key(state.run_id, node_id, state.workflow_version, str(self._step))

    async def _send_message(self, node_id: str, params: SendMessageParams) -> None:
        state = self._state
        if self._request.replay is not None:
            # A replay re-decides the path; it never messages people again.
            render(params.message, state.variables)  # but a missing variable still fails the same way
            state.audit.record(
                "ACTION_COMPLETED",
                at=workflow.now(),
                stage=node_id,
                data={"actionType": "send_message", "replayed": True},
            )
            return
        request = contracts.SendMessageRequest(
            run_id=state.run_id,
            node=node_id,
            message=render(params.message, state.variables),
            to=render(params.to, state.variables) if params.to else None,
            channel=params.channel,
            idempotency_key=self._key(node_id),
        )
        try:
            sent = await workflow.execute_activity(
                contracts.SEND_MESSAGE,
                request,
                result_type=contracts.SentMessage,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=MESSAGING_RETRY,
                summary=f"{node_id}: send_message",
            )
        except ActivityError as err:
            raise_if_cancelled(err)
            raise RunEnded(
                RunStatus.FAILED, node_id, f"send_message {node_id} failed: {failure_message(err)}"
            ) from None
        state.audit.record(
            "ACTION_COMPLETED",
            at=workflow.now(),
            stage=node_id,
            data={"actionType": "send_message", "messageId": sent.message_id, "channel": sent.channel},
        )

    async def _send_request(self, node_id: str, kind: str, params: Any, details: dict[str, Any]) -> str:
        """Ask for documents, a signature or a test through the channel; returns the request id."""
        state = self._state
        if self._request.replay is not None:
            state.audit.record(
                "ACTION_COMPLETED",
                at=workflow.now(),
                stage=node_id,
                data={"actionType": f"request_{kind}", "replayed": True},
            )
            return "replayed"
        request = contracts.SendRequest(
            run_id=state.run_id,
            node=node_id,
            kind=kind,
            to=render(params.to, state.variables) if params.to else None,
            message=render(params.message, state.variables) if params.message else None,
            channel=params.channel,
            details=details,
            idempotency_key=self._key(node_id),
        )
        try:
            receipt = await workflow.execute_activity(
                contracts.SEND_REQUEST,
                request,
                result_type=contracts.RequestReceipt,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=MESSAGING_RETRY,
                summary=f"{node_id}: request {kind}",
            )
        except ActivityError as err:
            raise_if_cancelled(err)
            raise RunEnded(
                RunStatus.FAILED, node_id, f"{kind} request {node_id} failed: {failure_message(err)}"
            ) from None
        state.audit.record(
            "ACTION_COMPLETED",
            at=workflow.now(),
            stage=node_id,
            data={"actionType": f"request_{kind}", "requestId": receipt.request_id, "channel": receipt.channel},
        )
        request_id: str = receipt.request_id
        return request_id

    async def _trigger_agent(self, node_id: str, params: TriggerAgentParams) -> None:
        state = self._state
        if self._request.replay is not None:
            await self._replay_child(node_id, params)
            return
        try:
            definition = await workflow.execute_activity(
                contracts.RESOLVE_DEFINITION,
                contracts.ResolveDefinition(agent=params.agent, version=params.version),
                result_type=AgentDefinition,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=5, non_retryable_error_types=PERMANENT_ERRORS),
            )
        except ActivityError as err:
            raise_if_cancelled(err)
            raise RunEnded(RunStatus.FAILED, node_id, f"trigger_agent {node_id}: {failure_message(err)}") from None
        child_id = f"{state.run_id}.{node_id}.{self._step}"
        handle = await workflow.start_child_workflow(
            "AgentExecution",
            ExecutionRequest(
                definition=definition,
                input=render_values(params.input, state.variables),
                correlation_id=self._correlation_id,
                parent_run_id=state.run_id,
            ),
            id=child_id,
            result_type=ExecutionResult,
            # A child the parent waits for goes down with it; a fire-and-forget child outlives it.
            parent_close_policy=ParentClosePolicy.REQUEST_CANCEL
            if params.wait_for_completion
            else ParentClosePolicy.ABANDON,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(sa.AGENT_EXECUTION_STATUS, RunStatus.PENDING.value),
                    SearchAttributePair(sa.AGENT_NAME, definition.agent),
                    SearchAttributePair(sa.WORKFLOW_VERSION, definition.workflow_version),
                ]
            ),
        )
        state.variables["triggeredExecutionId"] = child_id
        state.audit.record(
            "ACTION_COMPLETED",
            at=workflow.now(),
            stage=node_id,
            data={
                "actionType": "trigger_agent",
                "childExecutionId": child_id,
                "agent": definition.agent,
                "waitForCompletion": params.wait_for_completion,
            },
        )
        if not params.wait_for_completion:
            return
        attempt = 1
        while True:
            until = workflow.now() + params.timeout
            state.begin_wait(
                Waiting(
                    "agent",
                    node_id,
                    until,
                    {
                        "childExecutionId": child_id,
                        "childAgent": definition.agent,
                        "timeout": format_duration(params.timeout),
                        "attempt": attempt,
                    },
                )
            )
            workflow.logger.info("Execution %s entering WAITING state (waitingFor: agent)", state.run_id)
            try:
                await workflow.wait_condition(handle.done, timeout=params.timeout)
                break
            except TimeoutError:
                if handle.done():
                    break
                if params.on_timeout != "retry" or attempt > params.max_retries:
                    handle.cancel()  # stop waiting for it: the child is cancelled too
                attempt = await self._on_timeout(node_id, "agent", params, attempt)
                if attempt == 0:
                    state.variables.update(
                        childExecutionStatus="timeout", childExecutionSuccess=False, triggeredExecutionId=child_id
                    )
                    return
        await self._child_finished(node_id, child_id, params, handle)

    async def _child_finished(self, node_id: str, child_id: str, params: TriggerAgentParams, handle: Any) -> None:
        state = self._state
        try:
            result: ExecutionResult = await handle
            status, child_variables, detail = result.status, result.variables, result.result_summary
        except ChildWorkflowError as err:
            record = child_record(err)
            status = record.status if record else RunStatus.CANCELLED if _cancelled(err) else RunStatus.FAILED
            child_variables = record.variables if record else {}
            detail = (record.error_message or record.result_summary) if record else failure_message(err)
        # The child's variables become the parent's (the seed's "variables del hijo"), but the
        # parent keeps its own stage outputs.
        success = status is RunStatus.COMPLETED
        updates = {key: value for key, value in child_variables.items() if key != "stages"}
        updates.update(triggeredExecutionId=child_id, childExecutionStatus=status.value, childExecutionSuccess=success)
        state.variables.update(updates)
        self._resume(
            node_id,
            {"eventType": "AGENT_COMPLETED", "childExecutionId": child_id, "childStatus": status.value, "set": updates},
        )
        if not success and params.on_child_failure == "fail":
            raise RunEnded(RunStatus.FAILED, node_id, f"child run {child_id} ended {status.value}: {detail}")

    async def _replay_child(self, node_id: str, params: TriggerAgentParams) -> None:
        """A replay takes the child's recorded outcome instead of starting it again."""
        state = self._state
        if not params.wait_for_completion:
            state.audit.record(
                "ACTION_COMPLETED",
                at=workflow.now(),
                stage=node_id,
                data={"actionType": "trigger_agent", "replayed": True},
            )
            return
        # Enter the wait as the original did: resuming is only legal from WAITING.
        state.begin_wait(Waiting("agent", node_id, None, {"childAgent": params.agent, "replay": True}))
        recorded = self._recorded_resume(node_id)
        state.variables.update(recorded.set)
        self._resume(node_id, {"eventType": recorded.event_type, "set": recorded.set, "replayed": True})
        if recorded.event_type == "TIMEOUT" or (
            state.variables.get("childExecutionSuccess") is False and params.on_child_failure == "fail"
        ):
            raise RunEnded(RunStatus.FAILED, node_id, f"replayed child of {node_id} did not succeed")


def raise_if_cancelled(err: ActivityError) -> None:
    """An activity cancelled because the run was cancelled is the run's cancellation, not a failure."""
    if isinstance(err.cause, CancelledError):
        raise asyncio.CancelledError(str(err.cause)) from err


def child_record(err: ChildWorkflowError) -> ExecutionResult | None:
    cause = err.cause
    details = getattr(cause, "details", None)
    if details:
        try:
            return ExecutionResult.model_validate(details[0])
        except ValueError:
            return None
    return None


def _cancelled(err: ChildWorkflowError) -> bool:
    return isinstance(err.cause, CancelledError)


def failure_message(err: BaseException) -> str:
    """The innermost failure's message: what the activity said, not Temporal's wrapper."""
    cause: BaseException | None = err.cause if isinstance(err, FailureError) else err
    while isinstance(cause, FailureError) and not isinstance(cause, ApplicationError) and cause.cause is not None:
        cause = cause.cause
    return str(cause or err)
