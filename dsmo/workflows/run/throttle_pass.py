"""A run passing a throttle: a token from the key value's bucket before it starts, or before a stage runs.

A definition's ``throttle`` holds the run PENDING (its pending reason names the key) until the
bucket (`engine/throttle_bucket.py`) gives it a token; a stage node's holds the stage, the run
RUNNING with ``throttled`` in its status saying what it waits for. Tokens come in the order
they were asked for; nothing fails for waiting. Replays pass no throttle.
"""

from __future__ import annotations

from temporalio import workflow

from dsmo.workflows.common.durations import format_duration
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.common.templating import render
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.slot_io import TokenRequest
from dsmo.workflows.definition.flow_control import FlowControlError, Throttle, render_key, throttle_id
from dsmo.workflows.definition.sensitive import key_digest
from dsmo.workflows.run.activity_calls import ActivityFailed
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import RunEnded, ServiceFailed
from dsmo.workflows.run.service_budgets import BUDGETS, call_service, record_service_failure

# The key of a throttle that names none: one bucket for all.
ALL = "*"


async def pass_start(run: Run) -> None:
    """Wait, PENDING, for a token of the definition's throttle (if it has one)."""
    throttle = run.definition.throttle
    if throttle is None or run.replay is not None:
        return
    try:
        key = render_key("throttle.key", throttle.key, run.request.input) if throttle.key else ALL
    except FlowControlError as err:
        raise RunEnded(RunStatus.FAILED, "", str(err)) from None
    run.state.pending_reason = f"throttled: {_said(throttle, key, 'the agent', 'starts')}"
    await _token(run, run.definition.agent, key, throttle)


async def pass_stage(run: Run, node_id: str, throttle: Throttle | None) -> None:
    """Wait, RUNNING, for a token of a stage node's throttle (if it has one) before the stage runs.

    Raises:
        TemplateError: The key reads a variable the run lacks (the node fails, naming it).
    """
    if throttle is None or run.replay is not None:
        return
    key = render(throttle.key, run.state.variables) if throttle.key else ALL
    state = run.state
    state.throttled = f"stage {node_id} throttled: {_said(throttle, key, 'the stage', 'runs')}"
    try:
        await _token(run, f"{run.definition.agent}.{node_id}", key, throttle)
    finally:
        state.throttled = None


def _said(throttle: Throttle, key: str, everyone: str, what: str) -> str:
    name = f"key {key}" if key != ALL else everyone
    return f"{name} allows {throttle.limit} {what} per {format_duration(throttle.period)}"


async def _token(run: Run, owner: str, key: str, throttle: Throttle) -> None:
    state = run.state
    bucket = throttle_id(owner, key)
    request = TokenRequest(
        bucket=bucket,
        owner=owner,
        # Its digest only (as in the bucket's id): the bucket outlives an erasure of the run's subject.
        key=key_digest(key),
        run_id=state.run_id,
        limit=throttle.limit,
        period_seconds=throttle.period.total_seconds(),
        burst=throttle.burst,
    )
    try:
        await call_service(contracts.REQUEST_TOKEN, request, result_type=type(None))
    except ActivityFailed as failed:
        reason = record_service_failure(state, BUDGETS[contracts.REQUEST_TOKEN], failed.error, stage=None)
        raise ServiceFailed(contracts.REQUEST_TOKEN, reason) from None
    await workflow.wait_condition(lambda: bucket in run.slots_granted)
    run.slots_granted.discard(bucket)
