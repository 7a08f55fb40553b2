"""DSMO stages: one processor run per attempt, under the orchestrator's central failure policy.

Transient errors are retried with exponential backoff and jitter up to the stage's attempt cap;
permanent ones are not; a contract violation goes to the definition's fail-safe route. When a
stage cannot succeed it is dead-lettered with everything needed to reprocess it. A stage
commits at most once per (run, stage, version): a retry that finds an earlier attempt's output
reuses it and the orchestrator records the duplicate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from workflows import contracts
    from workflows.actions import failure_message, raise_if_cancelled
    from workflows.control import RouteTo, RunEnded, ServiceFailed
    from workflows.definition import AgentDefinition
    from workflows.nodes import RunAgentNode
    from workflows.records import ExecutionRequest
    from workflows.run_state import RunState
    from workflows.sensitive import masked_summary
    from workflows.service_budgets import ATTEMPT_TIMEOUT, BUDGETS, record_service_failure
    from workflows.status import RunStatus
    from workflows.templating import render

PERMANENT = frozenset({"InvalidInput", "UnknownAgent", "MissingArtifact"})
CONTRACT = frozenset({"ContractViolation"})
SINGLE_ATTEMPT = RetryPolicy(maximum_attempts=1)


@dataclass(frozen=True)
class StageFailure:
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
        if error_type in CONTRACT:
            return StageFailure("contract", error_type, cause.message)
        if error_type in PERMANENT or cause.non_retryable:
            return StageFailure("permanent", error_type, cause.message)
        return StageFailure("transient", error_type, cause.message)
    return StageFailure("transient", type(cause).__name__ if cause else "Error", failure_message(err))


class StageActions:
    """Mixed into AgentExecution: the `run_agent` node."""

    _state: RunState
    _definition: AgentDefinition
    _request: ExecutionRequest
    _correlation_id: str
    _input_uri: str | None
    _input_document: dict[str, Any] | None  # the run input, when small enough to send with tasks
    _visits: dict[str, int]
    _committed: set[str]

    # Provided by Routing and SagaActions in AgentExecution.
    _contract_violation: Callable[[str, str], None]
    _push: Callable[[str, Any, str | None, dict[str, Any]], None]

    async def _run_agent(self, node_id: str, node: RunAgentNode) -> None:
        state = self._state
        visit = self._visits[node_id] = self._visits.get(node_id, 0) + 1
        partition = None if visit == 1 else str(visit)
        key = contracts.idempotency_key(state.run_id, node_id, state.workflow_version, partition)
        input_uri = render(node.input, state.variables) if node.input else self._input_uri
        assert input_uri is not None
        # A stage on the run's own input gets the document with its task: one read less.
        input_document = None if node.input else self._input_document
        replay = self._request.replay
        errors: list[str] = []
        for attempt in range(1, node.retry.max_attempts + 1):
            task = contracts.StageTask(
                run_id=state.run_id,
                correlation_id=self._correlation_id,
                stage=node_id,
                stage_path=node_id if partition is None else f"{node_id}.v{partition}",
                workflow_version=state.workflow_version,
                agent=node.agent,
                agent_version=node.agent_version,
                artifact_in_uri=input_uri,
                idempotency_key=key,
                attempt=attempt,
                created_at=workflow.now(),
                config_ref=state.config_ref,
                output_schema=node.output_schema,
                reuse_uri=replay.reuse.get(node_id) if replay and visit == 1 else None,
                input_document=input_document,
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
                summary = await workflow.execute_activity(
                    contracts.RUN_STAGE,
                    task,
                    result_type=contracts.StageSummary,
                    start_to_close_timeout=node.timeout,
                    retry_policy=SINGLE_ATTEMPT,
                    summary=f"{node_id}: {node.agent} (attempt {attempt})",
                )
            except ActivityError as err:
                raise_if_cancelled(err)
                failure = classify(err)
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
                await self._dead_end(node_id, node, task, errors, failure)
                return
            await self._commit(node_id, node, task, summary)
            return

    async def _commit(
        self, node_id: str, node: RunAgentNode, task: contracts.StageTask, summary: contracts.StageSummary
    ) -> None:
        state = self._state
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
            self._contract_violation(node_id, f"stage {node_id} reported workflow_version {summary.workflow_version}")
        if task.idempotency_key in self._committed:
            state.audit.record(
                "DUPLICATE_IGNORED", at=workflow.now(), stage=node_id, data={"key": task.idempotency_key}
            )
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
            "summary": masked_summary(node_id, summary.summary, self._definition.sensitive or ()),
            "outputSha256": summary.output_sha256,
            "reused": summary.reused,
            "idempotencyKey": task.idempotency_key,
        }
        if state.audit.extended and summary.inference:
            data["inference"] = summary.inference
        state.audit.record(
            "STAGE_SUCCEEDED", at=summary.finished_at, artifact_uris=[summary.artifact_out_uri], data=data, **common
        )
        self._committed.add(task.idempotency_key)
        if node.compensate is not None:
            self._push(task.stage_path, node.compensate, None, summary.summary)
        state.variables.setdefault("stages", {})[node_id] = {
            "status": "succeeded",
            "outputUri": summary.artifact_out_uri,
            "summary": summary.summary,
            "attempt": summary.attempt,
            "agentVersion": summary.agent_version,
        }

    async def _dead_end(
        self, node_id: str, node: RunAgentNode, task: contracts.StageTask, errors: list[str], failure: StageFailure
    ) -> None:
        state = self._state
        state.variables.setdefault("stages", {})[node_id] = {
            "status": "failed",
            "error": failure.message,
            "errorType": failure.error_type,
            "attempt": task.attempt,
        }
        if failure.kind == "contract" and self._definition.fail_safe is not None:
            self._contract_violation(node_id, f"stage {node_id} ({node.agent}): {failure.message}")
        letter = contracts.DeadLetter(
            run_id=state.run_id,
            stage=node_id,
            agent=node.agent,
            agent_version=node.agent_version,
            workflow_version=state.workflow_version,
            config_ref=state.config_ref,
            correlation_id=self._correlation_id,
            artifact_in_uri=task.artifact_in_uri,
            idempotency_key=task.idempotency_key,
            attempts=task.attempt,
            error_type=failure.error_type,
            errors=errors,
            variables=state.variables,
            task_queue=workflow.info().task_queue,
            created_at=workflow.now(),
        )
        await self._write_dead_letter(letter)
        reason = "retries exhausted" if failure.kind == "transient" else failure.error_type
        raise RunEnded(
            RunStatus.FAILED, node_id, f"stage {node_id} ({node.agent}) failed ({reason}): {failure.message}"
        )

    async def _write_dead_letter(self, letter: contracts.DeadLetter) -> None:
        """`dlq/{run_id}/{stage}.json`, recorded as DEAD_LETTERED; a store that stays down is logged."""
        state = self._state
        budget = BUDGETS[contracts.WRITE_DEAD_LETTER]
        try:
            uri = await workflow.execute_activity(
                contracts.WRITE_DEAD_LETTER,
                letter,
                result_type=str,
                start_to_close_timeout=ATTEMPT_TIMEOUT,
                schedule_to_close_timeout=budget.total,
                retry_policy=budget.retry_policy,
            )
            state.audit.record(
                "DEAD_LETTERED",
                at=workflow.now(),
                stage=letter.stage,
                artifact_uris=[uri],
                data={"errorType": letter.error_type, "attempts": letter.attempts},
            )
        except ActivityError as err:
            raise_if_cancelled(err)
            record_service_failure(state, budget, err, stage=letter.stage)
            workflow.logger.warning(
                "dead letter for %s/%s not written: %s", state.run_id, letter.stage, failure_message(err)
            )

    async def _service_failed(self, failed: ServiceFailed) -> RunEnded:
        """A spent budget before the first node: record it, dead-letter the run at its start node."""
        state = self._state
        start = self._request.start_at or self._definition.start
        if state.status is RunStatus.PENDING:  # it never got its slot: it ran, and failed, all the same
            state.enter(RunStatus.RUNNING)
        letter = contracts.DeadLetter(
            run_id=state.run_id,
            stage=start,
            agent="",
            service=failed.activity,
            workflow_version=state.workflow_version,
            config_ref=state.config_ref,
            correlation_id=self._correlation_id,
            idempotency_key=contracts.idempotency_key(state.run_id, failed.activity, state.workflow_version),
            attempts=0,
            error_type="ServiceBudgetSpent",
            errors=[failed.message],
            variables=state.variables,
            task_queue=workflow.info().task_queue,
            created_at=workflow.now(),
        )
        await self._write_dead_letter(letter)
        return RunEnded(RunStatus.FAILED, start, failed.message)


__all__ = ["RouteTo", "StageActions", "classify"]
