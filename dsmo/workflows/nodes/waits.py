"""WAITING: waits for outside events and timers, with their timeout policies.

The `wait_for_response`, `wait_for_event` and `delay` nodes, and the waiting every other node
that waits shares (requests, children): enter WAITING, wait for the resume event or the
timer, apply `onTimeout` (continue, fail or retry), resume. A replay takes each wait's outcome
from the original run's record instead of waiting.

Longer than most modules: a wait's start, its resume after continue-as-new, its retry after a
timeout and its replay build the same `Waiting` and must agree on what it holds.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow

from dsmo.workflows.common import patches
from dsmo.workflows.common.durations import format_duration
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.common.templating import render
from dsmo.workflows.contracts.run_records import WaitCheckpoint
from dsmo.workflows.definition.node_types import (
    DelayNode,
    WaitForEventNode,
    WaitForResponseNode,
    WaitOptions,
    parse_until,
)
from dsmo.workflows.definition.sensitive import masked_variables
from dsmo.workflows.events.resume_events import RESUME_EVENT_FOR, variables_after
from dsmo.workflows.nodes.send_message import send_message
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import ContinueAsNewDue, RunEnded
from dsmo.workflows.run.flow_slots import give_back_while_waiting, take_back_after_waiting
from dsmo.workflows.run.inbox_judging import take_kept
from dsmo.workflows.run.state import Waiting, say_ending
from dsmo.workflows.run.trail_segments import recorded_values

TIMEOUT_SUMMARIES = {
    "response": "Timeout waiting for the user's response",
    "agent": "Timeout waiting for the child agent",
    "document": "Timeout waiting for the requested documents",
    "signature": "Timeout waiting for the signature",
    "test": "Timeout waiting for the test to be completed",
    "event": "Timeout waiting for the calendar event",
    "approval": "Timeout waiting for a decision on a tool call",
    "budget": "Timeout waiting for a person to raise the budget",
}
# A delay's `until` may be at most this far away.
MAX_UNTIL = timedelta(days=30)
# workflow.patched id: a wait's threadId, expectedFrom and title are rendered, as its other
# parameters are. Before, their templates stayed literal in waitingData, where match reads them.
RENDER_PATCH = "render-wait-parameters"
# workflow.patched id: a wait whose timeout ends the run says the run is ending before its
# timeoutActions are sent (it refuses requests meanwhile). Before, it said so only after them.
TIMEOUT_ENDS_FIRST_PATCH = "timeout-ends-before-its-actions"
# workflow.patched id: a wait that `onTimeout: retry` begins again keeps what the one before it
# received (documents) and showed (its request id, recipient, rendered parameters). Before, it
# began from the node's parameters, so a document that came before the timeout was asked again.
RETRY_KEEPS_PATCH = "wait-retry-keeps-received"


async def wait_for_response_node(
    run: Run, node_id: str, node: WaitForResponseNode, resume: WaitCheckpoint | None
) -> None:
    """The `wait_for_response` node: a reply from a person."""
    reply = node.parameters
    data = {k: v for k, v in (("expectedFrom", reply.expected_from), ("threadId", reply.thread_id)) if v}
    await await_event(run, node_id, "response", reply, data if resume else _rendered(run, data), resume=resume)


async def wait_for_event_node(run: Run, node_id: str, node: WaitForEventNode, resume: WaitCheckpoint | None) -> None:
    """The `wait_for_event` node: a calendar (or any named) event."""
    event = node.parameters
    details = {"event": render(event.event, run.state.variables)}
    title = _rendered(run, {"title": event.title}) if event.title and resume is None else {}
    await await_event(run, node_id, "event", event, details | title, resume=resume)


def _rendered(run: Run, shown: dict[str, Any]) -> dict[str, Any]:
    """What a wait shows, its templates rendered as text (an event's fields are compared with them).

    One that renders empty is left out, as if not given. A run that began such a wait before
    these were rendered keeps them as written; a wait with no template asks nothing, so its
    history gains no marker.
    """
    if not any(isinstance(value, str) and "{{" in value for value in shown.values()):
        return shown
    if not patches.patched(RENDER_PATCH):
        return shown
    rendered = {name: render(str(value), run.state.variables) for name, value in shown.items()}
    return {name: value for name, value in rendered.items() if value}


async def await_event(
    run: Run,
    node_id: str,
    kind: str,
    options: WaitOptions,
    data: dict[str, Any],
    *,
    requested: list[str] | None = None,
    resume: WaitCheckpoint | None = None,
) -> str | None:
    """Wait for the resume event of ``kind``; on timeout apply ``onTimeout`` (continue/fail/retry).

    Returns:
        The type of the event that resumed the run, or None when a timeout let it continue.
    """
    state = run.state
    attempt = resume.attempt if resume else 1
    if run.replay is not None:
        return await _replay_wait(run, node_id, kind, options, data)
    timed_out: Waiting | None = None  # the attempt a retry follows
    while True:
        if state.inbox:
            # An event kept for this wait may take it at once: then the run writes no status for
            # the wait (status_writes.py), where it wrote WAITING and RUNNING.
            state.writes.merge_from_now()
        if resume is not None:
            data_kept = dict(resume.data)
            if resume.until is not None:
                until = resume.until
            else:  # moved with restart_timers: the target wait's timeout starts now
                until = workflow.now() + options.timeout
                data_kept.update(timeout=format_duration(options.timeout), attempt=attempt)
            waiting = Waiting(kind, node_id, until, data_kept, list(resume.requested), dict(resume.received))
            state.begin_wait(waiting, record=False)
            resume = None
        else:
            until = workflow.now() + options.timeout
            waiting = _retried(
                Waiting(
                    kind,
                    node_id,
                    until,
                    {**data, "timeout": format_duration(options.timeout), "attempt": attempt},
                    list(requested or []),
                ),
                timed_out,
            )
            state.begin_wait(waiting, trail_key=run.fingerprint_key)
            workflow.logger.info("Execution %s entering WAITING state (waitingFor: %s)", state.run_id, kind)
        # An event that arrived early, kept in the inbox, resumes the run without waiting.
        kept = await take_kept(run, waiting) if state.inbox else None
        if kept is not None:
            state.resume_event = kept
        else:
            await give_back_while_waiting(run)  # a key that does not hold while the run waits
            remaining = max(until - workflow.now(), timedelta(0))
            try:
                await workflow.wait_condition(
                    lambda: state.resume_event is not None or run.continue_as_new_due(),
                    timeout=remaining if remaining > timedelta(0) else timedelta(milliseconds=1),
                )
            except TimeoutError:
                if state.resume_event is None:
                    if options.on_timeout != "fail":
                        await take_back_after_waiting(run)
                    attempt = await on_timeout(run, node_id, kind, options, attempt)
                    if attempt == 0:
                        return None
                    timed_out = waiting
                    continue
        event = state.resume_event
        if event is None:  # woken to continue as new, still waiting
            raise ContinueAsNewDue(node_id, _checkpoint(waiting, attempt))
        await take_back_after_waiting(run)  # in line again for a slot given back while it waited
        updates = variables_after(event, waiting.received, waiting.requested)
        if event.type == "SIGNATURE_COMPLETED" and not updates.get("signedAt"):
            updates["signedAt"] = workflow.now().isoformat()
        state.variables.update(updates)
        recorded = await recorded_values(
            run, masked_variables(updates, run.definition.sensitive or (), run.fingerprint_key)
        )
        resumed = {"eventType": event.type, "eventId": event.event_id, **recorded}
        resume_run(run, node_id, resumed | ({"fromInbox": True} if kept is not None else {}))
        return event.type


def _retried(fresh: Waiting, timed_out: Waiting | None) -> Waiting:
    """The wait an attempt begins: ``fresh`` (its deadline and attempt) with what ``timed_out`` had.

    ``timed_out`` is the attempt a retry follows (None for the first). The documents received so
    far stay received (the wait resumes once the rest arrive), and so does what the wait showed:
    a wait resumed from a checkpoint got its request id, recipient and rendered parameters from
    there, not from the node. A retry with nothing to keep asks no patch, so its history gains no
    marker; one from before the change begins afresh, as it did.
    """
    if timed_out is None:
        return fresh
    shown = {**timed_out.data, "timeout": fresh.data["timeout"], "attempt": fresh.data["attempt"]}
    kept = Waiting(fresh.kind, fresh.node, fresh.until, shown, list(timed_out.requested), dict(timed_out.received))
    if kept == fresh or not patches.patched(RETRY_KEEPS_PATCH):
        return fresh
    return kept


async def _replay_wait(run: Run, node_id: str, kind: str, options: WaitOptions, data: dict[str, Any]) -> str | None:
    """Replay a wait from the original's record: its event's variables, or its timeouts."""
    state, attempt = run.state, 1
    if run.replay_move_due(node_id, waiting=True):  # the original moved to another version from this wait
        raise ContinueAsNewDue(node_id, WaitCheckpoint(kind=kind, node=node_id, data=data))
    while True:
        # The record first: a replay it cannot answer fails from RUNNING (a wait cannot fail).
        recorded = run.recorded_resume(node_id, kind)
        replayed = Waiting(kind, node_id, None, {**data, "replay": True, "attempt": attempt})
        state.begin_wait(replayed, trail_key=run.fingerprint_key)
        if recorded.event_type != "TIMEOUT":
            state.variables.update(recorded.set)
            resume_run(run, node_id, {"eventType": recorded.event_type, "set": recorded.set, "replayed": True})
            return recorded.event_type
        attempt = await on_timeout(run, node_id, kind, options, attempt)
        if attempt == 0:
            return None


async def on_timeout(run: Run, node_id: str, kind: str, options: WaitOptions, attempt: int) -> int:
    """Apply onTimeout; returns the next attempt number, or 0 to go on to the next node."""
    retry_left = options.on_timeout == "retry" and attempt <= options.max_retries
    if options.on_timeout == "continue" or retry_left:
        resume_run(run, node_id, {"eventType": "TIMEOUT", "attempt": attempt, "onTimeout": options.on_timeout})
    elif options.timeout_actions and patches.patched(TIMEOUT_ENDS_FIRST_PATCH):
        # The timeout ends the run: a reply, rewind or move that came while the messages go out
        # would be taken and then lost with the run, so the run refuses them from now on.
        say_ending(run.state, RunStatus.TIMEOUT)
    for index, action in enumerate(options.timeout_actions):
        action_id = f"{node_id}.timeoutActions.{index}"
        # Each timeout is a message of its own: with one key for every attempt, the channel
        # would deliver the first and drop the others as repeats of it.
        await send_message(run, action_id, action.parameters, key=run.message_key(f"{action_id}.attempt-{attempt}"))
    if options.on_timeout == "continue":
        return 0
    if not retry_left:
        raise RunEnded(RunStatus.TIMEOUT, node_id, TIMEOUT_SUMMARIES[kind])
    return attempt + 1


async def delay_node(run: Run, node_id: str, node: DelayNode, resume: WaitCheckpoint | None) -> None:
    """The `delay` node: sleep for a duration or until a date."""
    state, params = run.state, node.parameters
    if run.replay is not None:  # a replay does not sit out the original's timers
        if run.replay_move_due(node_id, waiting=True):
            raise ContinueAsNewDue(node_id, WaitCheckpoint(kind="delay", node=node_id))
        run.recorded_resume(node_id, "delay")  # before the wait: a wait cannot fail
        # It still enters the wait, as the original did: resuming is only legal from WAITING.
        state.begin_wait(Waiting("delay", node_id, None, {"replay": True}))
        resume_run(run, node_id, {"eventType": RESUME_EVENT_FOR["delay"], "replayed": True})
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
    await give_back_while_waiting(run)
    remaining = until - workflow.now()
    if remaining > timedelta(0):
        try:
            await workflow.wait_condition(run.continue_as_new_due, timeout=remaining)
        except TimeoutError:
            pass
        else:
            raise ContinueAsNewDue(
                node_id, WaitCheckpoint(kind="delay", node=node_id, until=until, data={"until": until.isoformat()})
            )
    await take_back_after_waiting(run)
    resume_run(run, node_id, {"eventType": RESUME_EVENT_FOR["delay"]})


def resume_run(run: Run, node_id: str, data: dict[str, Any]) -> None:
    """Leave WAITING: RUNNING again, recorded as RUN_RESUMED with ``data``."""
    state = run.state
    state.enter(RunStatus.RUNNING)
    state.audit.record("RUN_RESUMED", at=workflow.now(), stage=node_id, data=data)
    workflow.logger.info("Resuming execution %s (%s)", state.run_id, data.get("eventType"))


def _absolute(node_id: str, text: str) -> datetime:
    try:
        until = parse_until(text)
    except ValueError as err:
        raise RunEnded(RunStatus.FAILED, node_id, f"{node_id}: {err}") from None
    if until - workflow.now() > MAX_UNTIL:
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
