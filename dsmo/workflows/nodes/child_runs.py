"""The `trigger_agent` node: start a child agent run, and wait for it if the node says so.

The child's variables become the parent's (the parent keeps its own stage outputs). A child
the parent waits for goes down with it; a fire-and-forget child outlives it. A replay takes
the child's recorded outcome instead of starting it again.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import CancelledError, ChildWorkflowError
from temporalio.workflow import ParentClosePolicy

from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.durations import format_duration
from dsmo.workflows.common.patches import NEXT_EXECUTION
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.common.templating import render_values
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.run_records import ExecutionRequest, ExecutionResult, WaitCheckpoint
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.definition.node_types import TriggerAgentNode, TriggerAgentParams
from dsmo.workflows.nodes.waits import on_timeout, resume_run
from dsmo.workflows.run.activity_calls import call_or_end, failure_message
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import RunEnded
from dsmo.workflows.run.state import Waiting


async def trigger_agent_node(run: Run, node_id: str, node: TriggerAgentNode, resume: WaitCheckpoint | None) -> None:
    """Start the child; with `waitForCompletion`, wait for it under the node's timeout policy."""
    state, params = run.state, node.parameters
    if run.replay is not None:
        await _replay_child(run, node_id, params)
        return
    definition = await call_or_end(
        contracts.RESOLVE_DEFINITION,
        contracts.ResolveDefinition(agent=params.agent, version=params.version),
        result_type=AgentDefinition,
        node_id=node_id,
        failed=f"trigger_agent {node_id}",
    )
    child_id = f"{state.run_id}.{node_id}.{run.step}"
    handle = await workflow.start_child_workflow(
        "AgentExecution",
        # A child runs on its parent's task queue, and so do its key locks (only the start
        # command's first sending reads the queue: a replay does not compare it).
        ExecutionRequest(
            definition=definition,
            input=render_values(params.input, state.variables),
            correlation_id=run.correlation_id,
            parent_run_id=state.run_id,
            # The child's data is its parent's subject's, unless its definition names another.
            subject=run.request.subject,
        )
        .started_on(workflow.info().task_queue)
        .model_copy(update=NEXT_EXECUTION),  # started for this code: no marker per change
        id=child_id,
        result_type=ExecutionResult,
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
        waiting_data = {
            "childExecutionId": child_id,
            "childAgent": definition.agent,
            "timeout": format_duration(params.timeout),
            "attempt": attempt,
        }
        state.begin_wait(Waiting("agent", node_id, until, waiting_data))
        workflow.logger.info("Execution %s entering WAITING state (waitingFor: agent)", state.run_id)
        try:
            await workflow.wait_condition(handle.done, timeout=params.timeout)
            break
        except TimeoutError:
            if handle.done():
                break
            if params.on_timeout != "retry" or attempt > params.max_retries:
                handle.cancel()  # stop waiting for it: the child is cancelled too
            attempt = await on_timeout(run, node_id, "agent", params, attempt)
            if attempt == 0:
                state.variables.update(
                    childExecutionStatus="timeout", childExecutionSuccess=False, triggeredExecutionId=child_id
                )
                return
    await _child_finished(run, node_id, child_id, params, handle)


async def _child_finished(run: Run, node_id: str, child_id: str, params: TriggerAgentParams, handle: Any) -> None:
    try:
        result: ExecutionResult = await handle
        status, child_variables, detail = result.status, result.variables, result.result_summary
    except ChildWorkflowError as err:
        record = child_record(err)
        cancelled = isinstance(err.cause, CancelledError)
        status = record.status if record else RunStatus.CANCELLED if cancelled else RunStatus.FAILED
        child_variables = record.variables if record else {}
        detail = (record.error_message or record.result_summary) if record else failure_message(err)
    success = status is RunStatus.COMPLETED
    updates = {key: value for key, value in child_variables.items() if key != "stages"}
    updates.update(triggeredExecutionId=child_id, childExecutionStatus=status.value, childExecutionSuccess=success)
    run.state.variables.update(updates)
    resume_run(
        run,
        node_id,
        {"eventType": "AGENT_COMPLETED", "childExecutionId": child_id, "childStatus": status.value, "set": updates},
    )
    if not success and params.on_child_failure == "fail":
        raise RunEnded(RunStatus.FAILED, node_id, f"child run {child_id} ended {status.value}: {detail}")


async def _replay_child(run: Run, node_id: str, params: TriggerAgentParams) -> None:
    """A replay takes the child's recorded outcome instead of starting it again."""
    state = run.state
    if not params.wait_for_completion:
        state.audit.record(
            "ACTION_COMPLETED", at=workflow.now(), stage=node_id, data={"actionType": "trigger_agent", "replayed": True}
        )
        return
    # The record first: a replay it cannot answer fails from RUNNING (a wait cannot fail).
    recorded = run.recorded_resume(node_id, "agent")
    # Enter the wait as the original did: resuming is only legal from WAITING.
    state.begin_wait(Waiting("agent", node_id, None, {"childAgent": params.agent, "replay": True}))
    state.variables.update(recorded.set)
    resume_run(run, node_id, {"eventType": recorded.event_type, "set": recorded.set, "replayed": True})
    if recorded.event_type == "TIMEOUT" or (
        state.variables.get("childExecutionSuccess") is False and params.on_child_failure == "fail"
    ):
        raise RunEnded(RunStatus.FAILED, node_id, f"replayed child of {node_id} did not succeed")


def child_record(err: ChildWorkflowError) -> ExecutionResult | None:
    """The child's terminal record, carried in the details of its failure (if it got that far)."""
    details = getattr(err.cause, "details", None)
    if details:
        try:
            return ExecutionResult.model_validate(details[0])
        except ValueError:
            return None
    return None
