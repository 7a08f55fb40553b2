"""WAITING as the seed defines it: waits for outside events and timers, with timeout policies."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.control import ContinueAsNewDue, RunEnded
    from workflows.durations import format_duration
    from workflows.events import RESUME_EVENT_FOR, variables_after
    from workflows.nodes import DelayParams, SendMessageParams, WaitOptions, parse_until
    from workflows.records import ExecutionRequest, RecordedResume, WaitCheckpoint, next_recorded
    from workflows.run_state import RunState, Waiting
    from workflows.sensitive import masked_variables
    from workflows.status import RunStatus
    from workflows.templating import render

TIMEOUT_SUMMARIES = {
    "response": "Timeout waiting for the user's response",
    "agent": "Timeout waiting for the child agent",
    "document": "Timeout waiting for the requested documents",
    "signature": "Timeout waiting for the signature",
    "test": "Timeout waiting for the test to be completed",
    "event": "Timeout waiting for the calendar event",
}


class WaitActions:
    """Mixed into AgentExecution: everything that puts a run in WAITING and takes it out."""

    _state: RunState
    _request: ExecutionRequest
    _replayed: int

    def _recorded_resume(self, node_id: str) -> RecordedResume:
        """Replay: the original run's next resume at this node, in order."""
        plan = self._request.replay
        assert plan is not None
        recorded, self._replayed = next_recorded(plan.resumes, self._replayed, node_id)
        if recorded is None:
            raise RunEnded(RunStatus.FAILED, node_id, f"replay diverged: the original run never resumed at {node_id}")
        return recorded

    def _continue_as_new_due(self) -> bool:
        raise NotImplementedError

    async def _send_message(self, node_id: str, params: SendMessageParams) -> None:
        raise NotImplementedError

    async def _await_event(
        self,
        node_id: str,
        kind: str,
        options: WaitOptions,
        data: dict[str, Any],
        *,
        requested: list[str] | None = None,
        resume: WaitCheckpoint | None = None,
    ) -> None:
        """Wait for the resume event of ``kind``; on timeout apply ``onTimeout`` (continue/fail/retry)."""
        state = self._state
        attempt = resume.attempt if resume else 1
        if self._request.replay is not None:
            await self._replay_wait(node_id, kind, options, data)
            return
        while True:
            if resume is not None:
                until = resume.until or workflow.now()
                waiting = Waiting(
                    kind, node_id, until, dict(resume.data), list(resume.requested), dict(resume.received)
                )
                state.begin_wait(waiting, record=False)
                resume = None
            else:
                until = workflow.now() + options.timeout
                waiting = Waiting(
                    kind,
                    node_id,
                    until,
                    {**data, "timeout": format_duration(options.timeout), "attempt": attempt},
                    list(requested or []),
                )
                state.begin_wait(waiting)
                workflow.logger.info("Execution %s entering WAITING state (waitingFor: %s)", state.run_id, kind)
            remaining = max(until - workflow.now(), timedelta(0))
            try:
                await workflow.wait_condition(
                    lambda: state.resume_event is not None or self._continue_as_new_due(),
                    timeout=remaining if remaining > timedelta(0) else timedelta(milliseconds=1),
                )
            except TimeoutError:
                if state.resume_event is None:
                    attempt = await self._on_timeout(node_id, kind, options, attempt)
                    if attempt == 0:
                        return
                    continue
            event = state.resume_event
            if event is None:  # woken to continue as new, still waiting
                raise ContinueAsNewDue(node_id, _checkpoint(waiting, attempt))
            updates = variables_after(event, waiting.received, waiting.requested)
            if event.type == "SIGNATURE_COMPLETED" and not updates.get("signedAt"):
                updates["signedAt"] = workflow.now().isoformat()
            state.variables.update(updates)
            recorded = masked_variables(updates, self._request.definition.sensitive or ())
            self._resume(node_id, {"eventType": event.type, "eventId": event.event_id, "set": recorded})
            return

    async def _replay_wait(self, node_id: str, kind: str, options: WaitOptions, data: dict[str, Any]) -> None:
        """Replay a wait from the original's record: its event's variables, or its timeouts."""
        state, attempt = self._state, 1
        while True:
            state.begin_wait(Waiting(kind, node_id, None, {**data, "replay": True, "attempt": attempt}))
            recorded = self._recorded_resume(node_id)
            if recorded.event_type != "TIMEOUT":
                state.variables.update(recorded.set)
                self._resume(node_id, {"eventType": recorded.event_type, "set": recorded.set, "replayed": True})
                return
            attempt = await self._on_timeout(node_id, kind, options, attempt)
            if attempt == 0:
                return

    async def _on_timeout(self, node_id: str, kind: str, options: WaitOptions, attempt: int) -> int:
        """Apply onTimeout; returns the next attempt number, or 0 to go on to the next node."""
        retry_left = options.on_timeout == "retry" and attempt <= options.max_retries
        if options.on_timeout == "continue" or retry_left:
            self._resume(node_id, {"eventType": "TIMEOUT", "attempt": attempt, "onTimeout": options.on_timeout})
        for index, action in enumerate(options.timeout_actions):
            await self._send_message(f"{node_id}.timeoutActions.{index}", action.parameters)
        if options.on_timeout == "continue":
            return 0
        if not retry_left:
            raise RunEnded(RunStatus.TIMEOUT, node_id, TIMEOUT_SUMMARIES[kind])
        return attempt + 1

    async def _delay(self, node_id: str, params: DelayParams, resume: WaitCheckpoint | None = None) -> None:
        state = self._state
        if self._request.replay is not None:  # a replay does not sit out the original's timers
            # It still enters the wait, as the original did: resuming is only legal from WAITING.
            state.begin_wait(Waiting("delay", node_id, None, {"replay": True}))
            self._recorded_resume(node_id)
            self._resume(node_id, {"eventType": RESUME_EVENT_FOR["delay"], "replayed": True})
            return
        if resume is not None and resume.until is not None:
            until = resume.until
        elif params.duration is not None:
            until = workflow.now() + params.duration
        else:
            until = _absolute(node_id, render(params.until or "", state.variables))
        if resume is None:
            state.begin_wait(Waiting("delay", node_id, until, {"until": until.isoformat()}))
            workflow.logger.info("Execution %s entering WAITING state (waitingFor: delay)", state.run_id)
        else:
            state.begin_wait(Waiting("delay", node_id, until, dict(resume.data)), record=False)
        remaining = until - workflow.now()
        if remaining > timedelta(0):
            try:
                await workflow.wait_condition(self._continue_as_new_due, timeout=remaining)
            except TimeoutError:
                pass
            else:
                raise ContinueAsNewDue(
                    node_id, WaitCheckpoint(kind="delay", node=node_id, until=until, data={"until": until.isoformat()})
                )
        self._resume(node_id, {"eventType": RESUME_EVENT_FOR["delay"]})

    def _resume(self, node_id: str, data: dict[str, Any]) -> None:
        state = self._state
        state.enter(RunStatus.RUNNING)
        state.audit.record("RUN_RESUMED", at=workflow.now(), stage=node_id, data=data)
        workflow.logger.info("Resuming execution %s (%s)", state.run_id, data.get("eventType"))


def _absolute(node_id: str, text: str) -> datetime:
    try:
        until = parse_until(text)
    except ValueError as err:
        raise RunEnded(RunStatus.FAILED, node_id, f"{node_id}: {err}") from None
    if until - workflow.now() > timedelta(days=30):
        raise RunEnded(RunStatus.FAILED, node_id, f"{node_id}: until {text} is more than 30d away (the maximum)")
    return until


def _checkpoint(waiting: Waiting, attempt: int) -> WaitCheckpoint:
    return WaitCheckpoint(
        kind=waiting.kind,
        node=waiting.node,
        until=waiting.until,
        data=waiting.data,
        requested=waiting.requested,
        received=waiting.received,
        attempt=attempt,
    )
