"""DSMO stages: one processor run per attempt, under the orchestrator's central failure policy.

Transient errors are retried with exponential backoff and jitter up to the stage's attempt cap;
permanent ones are not; a contract violation goes to the definition's fail-safe route. When a
stage cannot succeed it is dead-lettered with everything needed to reprocess it (a replay
records the letter it would have written, and writes none: dead_letters.py).

Each visit of a stage (a loop visits it again: ``node.vN``) commits once. Outputs are keyed by
attempt (``.../{node or node.vN}/attempt={n}/output.json``); a retry that finds an earlier
attempt's output reuses it and the orchestrator records the duplicate. The attempt a visit
committed (its `STAGE_SUCCEEDED`'s ``attempt``) is what a replay reads: its output, and for an
`llm` stage the model calls recorded beside it.

Longer than most modules: a stage's attempt loop, its failure policy and the visit it commits
share the attempt's state, and split apart each would pass it back and forth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeout

from dsmo.workflows.common import patches
from dsmo.workflows.common.errors import CONTRACT_VIOLATION, STAGE_PERMANENT
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.common.templating import render
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.run_records import WaitCheckpoint
from dsmo.workflows.definition.local_stages import chosen_by_default, runs_locally
from dsmo.workflows.definition.node_types import LlmNode, RunAgentNode, StageNode
from dsmo.workflows.definition.sensitive import masked_summary
from dsmo.workflows.nodes.budgets import before_model_call, repairs_stopped
from dsmo.workflows.nodes.model_calls import TurnInput, model_call
from dsmo.workflows.run.activity_calls import LIVENESS_TIMEOUT, SINGLE_ATTEMPT, ActivityFailed, call, failure_message
from dsmo.workflows.run.context import Run, workflow_task
from dsmo.workflows.run.control import RunEnded
from dsmo.workflows.run.dead_letters import write_dead_letter
from dsmo.workflows.run.routing import contract_violation
from dsmo.workflows.run.spend import count_model_calls
from dsmo.workflows.run.throttle_pass import pass_stage
from dsmo.workflows.saga.compensation_stack import push

# workflow.patched id: a stage in the workflow task where a wait took an event sent by update runs
# as a regular activity (`update_unrecorded`).
UPDATE_RECORDED_FIRST_PATCH = "update-recorded-before-local-stages"


@dataclass(frozen=True)
class StageFailure:
    """The central policy's view of one failed attempt."""

    kind: str  # transient | permanent | contract
    error_type: str
    message: str


def classify(err: ActivityError) -> StageFailure:
    """The central policy's view of a failed attempt."""
    cause = err.cause
    if isinstance(cause, ActivityTimeout):
        kind = cause.type.name.lower() if cause.type is not None else "timeout"
        return StageFailure("transient", "Timeout", f"timed out ({kind})")
    if isinstance(cause, ApplicationError):
        error_type = cause.type or "Error"
        if error_type == CONTRACT_VIOLATION:
            return StageFailure("contract", error_type, cause.message)
        if error_type in STAGE_PERMANENT or cause.non_retryable:
            return StageFailure("permanent", error_type, cause.message)
        return StageFailure("transient", error_type, cause.message)
    return StageFailure("transient", type(cause).__name__ if cause else "Error", failure_message(err))


async def run_agent_node(run: Run, node_id: str, node: StageNode, resume: WaitCheckpoint | None) -> None:
    """The `run_agent` and `llm` nodes: one processor run per attempt until it commits or cannot.

    An `llm` node's model is asked only within the run's budget (budgets.py). A visit whose
    repairs of an invalid answer the budget stopped has no answer: the check routes the budget,
    or, raised by a person, the model is asked again in a new visit.
    """
    if not isinstance(node, LlmNode):
        await stage_visit(run, node_id, node)
        return
    while True:
        await before_model_call(run, node_id, resume)
        resume = None
        _, summary = await stage_visit(run, node_id, node)
        if not repairs_stopped(summary.inference):
            return


async def stage_visit(
    run: Run, node_id: str, node: StageNode, *, turn: TurnInput | None = None
) -> tuple[contracts.StageTask, contracts.StageSummary]:
    """One visit of a stage, attempt after attempt, until it commits: its last task and its summary.

    A tool-using `llm` node makes one visit per model turn, each with its ``turn``: the
    conversation so far and the tools offered.

    Raises:
        RunEnded: The stage cannot succeed (dead-lettered), or a replay has no record of it.
    """
    state = run.state
    visit = run.enter_node(node_id)
    partition = None if visit == 1 else str(visit)
    stage_path = node_id if partition is None else f"{node_id}.v{partition}"
    key = contracts.idempotency_key(state.run_id, node_id, state.workflow_version, partition)
    input_uri = render(node.input, state.variables) if node.input else run.input_uri
    assert input_uri is not None
    # A stage on the run's own input gets the document with its task: one read less.
    input_document = None if node.input else run.input_document
    replay = run.replay
    llm = model_call(run, node_id, node, stage_path, visit, turn) if isinstance(node, LlmNode) else None
    await pass_stage(run, node_id, node.throttle)  # a throttled stage waits for its turn first
    # Before local stages the same default meant a regular activity: the patch (status_writes.py)
    # keeps what a run's history recorded, and lets a run follow the new default from here on.
    local = runs_locally(run.definition, node) and (
        not chosen_by_default(run.definition, node) or state.writes.merge_from_now()
    )
    errors: list[str] = []
    for attempt in range(1, node.retry.max_attempts + 1):
        local_now = local and not update_unrecorded(run)
        task = contracts.StageTask(
            run_id=state.run_id,
            correlation_id=run.correlation_id,
            stage=node_id,
            stage_path=stage_path,
            workflow_version=state.workflow_version,
            agent=node.agent,
            agent_version=node.agent_version,
            artifact_in_uri=input_uri,
            idempotency_key=key,
            attempt=attempt,
            created_at=workflow.now(),
            config_ref=state.config_ref,
            output_schema=node.output_schema if isinstance(node, RunAgentNode) else None,
            reuse_uri=replay.reuse.get(stage_path) if replay else None,
            input_document=input_document,
            llm=llm,
            seal=run.seal,
            begun_mark=run.begun_marks.mark_for(workflow_task()) if local_now and replay is None else contracts.MARK,
        )
        state.audit.record(
            "STAGE_ENQUEUED",
            at=task.created_at,
            stage=node_id,
            attempt=attempt,
            artifact_uris=[input_uri],
            data={"agent": node.agent, "idempotencyKey": key},
        )
        try:
            summary = await _attempt(run, node_id, node, task, local=local_now)
        except ActivityFailed as failed:
            failure = classify(failed.error)
            errors.append(f"attempt {attempt}: {failure.error_type}: {failure.message}")
            state.audit.record(
                "STAGE_FAILED",
                at=workflow.now(),
                stage=node_id,
                attempt=attempt,
                data={"error": failure.message, "errorType": failure.error_type, "kind": failure.kind},
            )
            if failure.kind == "transient" and attempt < node.retry.max_attempts:
                await workflow.sleep(node.retry.delay(attempt, workflow.random().random()))
                continue
            await _dead_end(run, node_id, node, task, errors, failure)
        _commit(run, node_id, node, task, summary)
        return task, summary
    raise AssertionError("unreachable: the last attempt commits or dead-ends")  # pragma: no cover


def update_unrecorded(run: Run) -> bool:
    """Whether the run acted in this workflow task on an event that came by update (a wait took
    it), which Temporal has not recorded yet.

    Temporal writes an update into the history only when the workflow task that took it
    completes. A local attempt runs inside that task, so its effect would go out on a decision
    the server could still lose with the task (a worker that dies, then an update the server
    dropped and its caller stopped sending), and the run, taken over, could go down another
    branch and act again under another key. A regular activity is scheduled by the task's
    completion, with the update: the attempt runs as one instead. An event only kept for a wait
    ahead decides nothing yet, so stages before that wait stay local. Runs from before this
    (their request's revision) ask `workflow.patched`.
    """
    return run.acted_on_update_in == workflow_task() and patches.patched(UPDATE_RECORDED_FIRST_PATCH)


async def _attempt(
    run: Run, node_id: str, node: StageNode, task: contracts.StageTask, *, local: bool
) -> contracts.StageSummary:
    """One attempt of the stage, as a regular or a local activity.

    Raises:
        ActivityFailed: The attempt failed.
    """
    if not local:
        return await _call_stage(node_id, node, task, local=False)
    run.state.writes.hold()  # a status write due now is merged with what follows the attempt
    began_in = workflow_task()
    run.begun_marks.started()
    did_own_work = False
    try:
        summary = await _call_stage(node_id, node, task, local=True)
        did_own_work = not summary.reused
        return summary
    finally:
        run.begun_marks.ended(began_in, workflow_task(), did_own_work=did_own_work)
        run.state.writes.release()


async def _call_stage(
    node_id: str, node: StageNode, task: contracts.StageTask, *, local: bool
) -> contracts.StageSummary:
    return await call(
        contracts.RUN_STAGE,
        task,
        result_type=contracts.StageSummary,
        start_to_close_timeout=node.timeout,
        # A model call heartbeats while it waits for the answer: a dead worker is seen in
        # seconds, not after the node's timeout (docs/reliability.md: upgrade activity
        # workers first, as one from before heartbeats would see its long calls retried).
        heartbeat_timeout=LIVENESS_TIMEOUT if isinstance(node, LlmNode) else None,
        retry_policy=SINGLE_ATTEMPT,
        summary=f"{node_id}: {node.agent} (attempt {task.attempt})",
        local=local,
    )


def _commit(
    run: Run, node_id: str, node: StageNode, task: contracts.StageTask, summary: contracts.StageSummary
) -> None:
    state = run.state
    if summary.workflow_version != state.workflow_version:
        # A completion from another version of the graph (e.g. a stale worker) is never applied.
        state.audit.record(
            "INCONSISTENCY",
            at=workflow.now(),
            stage=node_id,
            attempt=task.attempt,
            data={
                "expected": state.workflow_version,
                "got": summary.workflow_version,
                "outputUri": summary.artifact_out_uri,
            },
        )
        contract_violation(run, node_id, f"stage {node_id} reported workflow_version {summary.workflow_version}")
    if task.idempotency_key in run.committed:
        state.audit.record("DUPLICATE_IGNORED", at=workflow.now(), stage=node_id, data={"key": task.idempotency_key})
        return
    if summary.reused and summary.attempt != task.attempt:
        state.audit.record(
            "DUPLICATE_IGNORED",
            at=workflow.now(),
            stage=node_id,
            attempt=task.attempt,
            data={
                "idempotencyKey": task.idempotency_key,
                "committedAttempt": summary.attempt,
                "outputUri": summary.artifact_out_uri,
            },
        )
    common: dict[str, Any] = {"stage": node_id, "attempt": summary.attempt, "agent_version": summary.agent_version}
    state.audit.record("STAGE_STARTED", at=summary.started_at, artifact_uris=[task.artifact_in_uri], **common)
    data: dict[str, Any] = {
        "summary": masked_summary(node_id, summary.summary, run.definition.sensitive or (), run.fingerprint_key),
        "outputSha256": summary.output_sha256,
        "reused": summary.reused,
        "idempotencyKey": task.idempotency_key,
    }
    if isinstance(node, LlmNode):
        data["llm"] = summary.inference  # model, prompt hash, tokens, latency, the calls' artifacts
        count_model_calls(run, summary.inference)
    elif state.audit.extended and summary.inference:
        data["inference"] = summary.inference
    state.audit.record(
        "STAGE_SUCCEEDED", at=summary.finished_at, artifact_uris=[summary.artifact_out_uri], data=data, **common
    )
    run.committed[task.idempotency_key] = None
    if isinstance(node, RunAgentNode) and node.compensate is not None:
        push(run, task.stage_path, node.compensate, None, summary.summary)
    state.variables.setdefault("stages", {})[node_id] = {
        "status": "succeeded",
        "outputUri": summary.artifact_out_uri,
        "summary": summary.summary,
        "attempt": summary.attempt,
        "agentVersion": summary.agent_version,
    }


async def _dead_end(
    run: Run, node_id: str, node: StageNode, task: contracts.StageTask, errors: list[str], failure: StageFailure
) -> NoReturn:
    state = run.state
    state.variables.setdefault("stages", {})[node_id] = {
        "status": "failed",
        "error": failure.message,
        "errorType": failure.error_type,
        "attempt": task.attempt,
    }
    if failure.kind == "contract" and run.definition.fail_safe is not None:
        contract_violation(run, node_id, f"stage {node_id} ({node.agent}): {failure.message}")
    letter = contracts.DeadLetter(
        run_id=state.run_id,
        stage=node_id,
        agent=node.agent,
        agent_version=node.agent_version,
        workflow_version=state.workflow_version,
        config_ref=state.config_ref,
        correlation_id=run.correlation_id,
        artifact_in_uri=task.artifact_in_uri,
        idempotency_key=task.idempotency_key,
        attempts=task.attempt,
        error_type=failure.error_type,
        errors=errors,
        variables=state.variables,
        task_queue=workflow.info().task_queue,
        created_at=workflow.now(),
        seal=run.seal,
    )
    await write_dead_letter(run, letter)
    reason = "retries exhausted" if failure.kind == "transient" else failure.error_type
    raise RunEnded(RunStatus.FAILED, node_id, f"stage {node_id} ({node.agent}) failed ({reason}): {failure.message}")
