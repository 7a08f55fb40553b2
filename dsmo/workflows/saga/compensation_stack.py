"""The saga: compensations pushed on a typed stack as steps succeed, unwound in reverse (LIFO).

`invoke` nodes run a saga action (Temporal retries it under the node's `retry:`). Unwinding
runs for completed, compensable steps only (never the step that failed), goes on past a
failing compensation (collecting its error), and is shielded from cancellation: it runs to the
end even while the run is being cancelled. A compensation that fails is handed to a durable
CompensationRetry workflow (1, 2, 4, 8, 16 minutes by default) and the run records a partial
result.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import RetryState
from temporalio.workflow import ParentClosePolicy

from dsmo.workflows.common import patches
from dsmo.workflows.common.cancel_shield import settled, shielded
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.common.templating import render_values
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.run_records import Compensation, WaitCheckpoint
from dsmo.workflows.definition.conditions import ConditionError
from dsmo.workflows.definition.node_types import CompensationSpec, InvokeNode
from dsmo.workflows.run.activity_calls import SINGLE_ATTEMPT, ActivityFailed, action_retry, call
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import RunEnded
from dsmo.workflows.run.routing import bounded_condition
from dsmo.workflows.saga.action_outputs import recorded_output
from dsmo.workflows.saga.compensation_retry import CompensationRetry, CompensationRetryRequest, retry_id

# workflow.patched id: replays take saga actions' outcomes from the record (they ran them again).
REPLAY_RECORDED_ACTIONS_PATCH = "replay-recorded-actions"
# workflow.patched id: a cancel waits for the saga step under way, which is then undone with the
# others. Before, the run stopped waiting for it, and an effect that landed was never undone.
STEP_ENDS_BEFORE_CANCEL_PATCH = "step-ends-before-cancel"
COMPENSATION_TIMEOUT = timedelta(seconds=60)


async def invoke_node(run: Run, node_id: str, node: InvokeNode, resume: WaitCheckpoint | None) -> None:
    """The `invoke` node: run the saga action, keep its output, push its compensation."""
    state = run.state
    visit = run.enter_node(node_id)
    step = node_id if visit == 1 else f"{node_id}.v{visit}"
    if _replaying_actions(run):
        await _replay_invoke(run, node_id, step, node)
        return
    task = contracts.ActionTask(
        run_id=state.run_id,
        node=step,
        action=node.action,
        input=render_values(node.input, state.variables),
        idempotency_key=f"op:{state.run_id}:{step}",
    )
    acting = call(
        contracts.INVOKE_ACTION,
        task,
        result_type=contracts.ActionResult,
        start_to_close_timeout=node.timeout,
        retry_policy=action_retry(node.retry),
        summary=f"{node_id}: {node.action}",
    )
    cancelled_meanwhile = False
    try:
        if patches.patched(STEP_ENDS_BEFORE_CANCEL_PATCH):
            # A cancel does not abandon a step under way: its effect may land all the same. The
            # run waits for the step, records it, and the unwinding undoes it with the others.
            finished, cancelled_meanwhile = await settled(acting)
            result = finished.result()
        else:
            result = await acting
    except ActivityFailed as failed:
        reason = failed.message
        state.audit.record(
            "STAGE_FAILED",
            at=workflow.now(),
            stage=node_id,
            data={"action": node.action, "error": reason, **_attempts_of(failed, node.retry.max_attempts)},
        )
        if cancelled_meanwhile:
            raise asyncio.CancelledError from None  # the cancel came first: the run ends cancelled
        raise RunEnded(RunStatus.FAILED, node_id, f"{node_id} ({node.action}) failed: {reason}") from None
    # The step is done: it goes on the stack before anything else is awaited, so a cancel that
    # lands while its output is being recorded still undoes it, after the step is recorded.
    state.variables.setdefault("steps", {})[node_id] = result.output
    if node.compensate is not None:
        push(run, step, node.compensate, node.action, result.output)
    recorded, cancelled = await recorded_output(run, result.output)
    state.audit.record(
        "STAGE_SUCCEEDED",
        at=workflow.now(),
        stage=node_id,
        data={
            "action": node.action,
            **recorded,
            "idempotencyKey": task.idempotency_key,
            **({"attempts": result.attempt} if result.attempt > 1 else {}),
        },
    )
    if cancelled or cancelled_meanwhile:
        raise asyncio.CancelledError


def _attempts_of(failed: ActivityFailed, max_attempts: int) -> dict[str, Any]:
    """How the action's retries ended, for the trail: each attempt's own failure is in Temporal's
    history (`ActivityTaskStarted.lastFailure`); the trail says that there were retries and why they stopped."""
    retry_state = failed.error.retry_state
    if retry_state is None:
        return {}
    ended: dict[str, Any] = {"retryState": retry_state.name}
    if retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED:
        ended["attempts"] = max_attempts
    return ended


def _replaying_actions(run: Run) -> bool:
    """A replay takes actions' outcomes from the record. Replays started before it did ran
    them again, and must replay as they ran."""
    return run.replay is not None and patches.patched(REPLAY_RECORDED_ACTIONS_PATCH)


async def _replay_invoke(run: Run, node_id: str, step: str, node: InvokeNode) -> None:
    """The original's outcome of this step, recorded as the replay's: nothing is executed."""
    state = run.state
    recorded = run.recorded_action(node_id)
    if recorded.output is None:
        error = recorded.error or "failed"
        state.audit.record(
            "STAGE_FAILED",
            at=workflow.now(),
            stage=node_id,
            data={"action": node.action, "error": error, "replayed": True},
        )
        raise RunEnded(RunStatus.FAILED, node_id, f"{node_id} ({node.action}) failed: {error}")
    state.variables.setdefault("steps", {})[node_id] = recorded.output
    if node.compensate is not None:
        push(run, step, node.compensate, node.action, recorded.output)
    shown, cancelled = await recorded_output(run, recorded.output)
    state.audit.record(
        "STAGE_SUCCEEDED",
        at=workflow.now(),
        stage=node_id,
        data={"action": node.action, **shown, "replayed": True},
    )
    if cancelled:
        raise asyncio.CancelledError


def push(run: Run, step: str, spec: CompensationSpec, own_action: str | None, output: dict[str, Any]) -> None:
    """After a step succeeds: remember how to undo it (if its output says it can be undone)."""
    if spec.when is not None:
        try:
            compensatable = bounded_condition(spec.when, {"output": output})
        except ConditionError as err:
            compensatable = True
            workflow.logger.warning("isCompensatable of %s failed (%s); kept on the stack", step, err)
        if not compensatable:
            return
    action = spec.action or own_action
    assert action is not None  # the definition check requires one for non-invoke nodes
    run.saga.append(
        Compensation(node=step, action=action, kind=spec.kind, output=output, key=f"comp:{run.state.run_id}:{step}")
    )


async def unwind(run: Run, trigger: str) -> dict[str, Any] | None:
    """Compensate completed steps in reverse; returns the run's compensation record."""
    if not run.saga or trigger not in run.definition.compensation.on:
        return None
    return await shielded(_unwind_all(run, trigger))


async def unwind_above(run: Run, depth: int, trigger: str) -> dict[str, Any] | None:
    """Compensate the steps above the stack's first ``depth`` in reverse (LIFO); those stay.

    A rewind's undoing: whatever the definition's `compensation.on` says, since going back
    makes those steps as if they had not been done.
    """
    if len(run.saga) <= depth:
        return None
    kept, run.saga = run.saga[:depth], run.saga[depth:]
    try:
        return await shielded(_unwind_all(run, trigger))
    finally:
        run.saga = kept + run.saga


async def _unwind_all(run: Run, trigger: str) -> dict[str, Any]:
    state, policy = run.state, run.definition.compensation
    compensated: list[str] = []
    failed: list[dict[str, Any]] = []
    workflow.logger.info("Execution %s compensating %d step(s) (%s)", state.run_id, len(run.saga), trigger)
    while run.saga:
        entry = run.saga.pop()  # LIFO
        task = contracts.CompensationTask(
            run_id=state.run_id,
            node=entry.node,
            action=entry.action,
            kind=entry.kind,
            output=entry.output,
            key=entry.key,
        )
        state.audit.record(
            "COMPENSATION_STARTED",
            at=workflow.now(),
            stage=entry.node,
            attempt=1,
            data={"action": entry.action, "kind": entry.kind, "key": entry.key, "trigger": trigger},
        )
        if _replaying_actions(run):  # the replay did not execute the step: nothing to undo
            outcome: dict[str, Any] = {"applied": False, "replayed": True}
        else:
            try:
                result = await call(
                    contracts.COMPENSATE,
                    task,
                    result_type=contracts.CompensationResult,
                    start_to_close_timeout=COMPENSATION_TIMEOUT,
                    retry_policy=SINGLE_ATTEMPT,
                    cancellation_is_failure=True,
                )
            except ActivityFailed as failure:
                error = failure.message
                retry = await _hand_over(run, task, error, policy.max_retries)
                state.audit.record(
                    "COMPENSATION_FAILED",
                    at=workflow.now(),
                    stage=entry.node,
                    attempt=1,
                    data={"action": entry.action, "error": error, "retriedBy": retry},
                )
                failed.append({"node": entry.node, "action": entry.action, "error": error, "retriedBy": retry})
                continue
            outcome = {"applied": result.applied, "detail": result.detail}
        state.audit.record(
            "COMPENSATION_SUCCEEDED",
            at=workflow.now(),
            stage=entry.node,
            attempt=1,
            data={"action": entry.action, **outcome},
        )
        compensated.append(entry.node)
    return {
        "status": "partial" if failed else "complete",
        "trigger": trigger,
        "compensated": compensated,
        "failed": failed,
    }


async def _hand_over(run: Run, task: contracts.CompensationTask, error: str, retries: int) -> str | None:
    """Start the durable retry of a failed compensation; it outlives this run."""
    if retries == 0:
        return None
    policy = run.definition.compensation
    child_id = retry_id(task.run_id, task.node)
    await workflow.start_child_workflow(
        CompensationRetry.run,
        CompensationRetryRequest(
            task=task,
            retries=retries,
            initial_interval_seconds=policy.initial_interval.total_seconds(),
            backoff_coefficient=policy.backoff_coefficient,
            errors=[error],
        ),
        id=child_id,
        parent_close_policy=ParentClosePolicy.ABANDON,
        memo={"compensation": {"task": task.model_dump(mode="json")}},
    )
    return child_id
