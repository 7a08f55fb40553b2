"""Resume events in: applied now, kept in the run's inbox for a wait ahead, or refused.

Whether the run takes an event is decided here, once `resume_events.well_formed` has said it is
well formed. Every way in (the `deliver_event` update, raw signals, so the ingress, the console,
the CLI and the `temporal` CLI too) goes through `judge`: the update's validator through `check`
before anything is written to history, the update's handler and raw signals through `take`,
which is also the one place a run remembers the ids of the events it took (`seen_event_ids`).
An event the wait in progress takes is applied. One that it does not take but that some wait
still reachable from the current node could take (decided from the definition's graph) is kept,
in arrival order, until a wait takes it (`inbox_judging.take_kept`), its time-to-live ends
(`keep_inbox`) or no wait ahead can take it any more (`drop_unreachable`). Anything else is
refused with a reason.

Runs that started before the inbox existed refused such events. `workflow.patched(INBOX_PATCH)`
is asked only where the two rules differ, so a history recorded under the old rule replays as it
ran and runs that never meet the difference write no marker. Every golden history replays under
the inbox's rule alone; `workflow.deprecate_patch` is the next step once no run generation
started before the inbox is open (a visibility query can tell).

Longer than most modules: every judgement of an event (now, ahead, a wait's own checks on a
reply, a decision or a raise) is in this one place, so every way in gets the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from temporalio import workflow

from dsmo.workflows.common import patches
from dsmo.workflows.definition.conditions import ConditionError, ConditionScope
from dsmo.workflows.definition.node_types import ExternalWaitNode, ExternalWaitOptions, RequestDocumentNode
from dsmo.workflows.definition.sensitive import fingerprint
from dsmo.workflows.definition.tools import decision_problem
from dsmo.workflows.definition.waits_ahead import takes_kind, waits_ahead
from dsmo.workflows.events.inbox import DEFAULT_POLICY, InboxEntry, InboxPolicy, event_size, full_reason
from dsmo.workflows.events.resume_events import EVENT_KINDS, EventAck, EventRejected, ResumeEvent
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.routing import activation
from dsmo.workflows.run.spend import raise_problem
from dsmo.workflows.run.state import RunState, Waiting

# workflow.patched id: early events are kept for a wait ahead, and a wait's match (and
# expectedFrom) decides which events it takes. Before, such events were refused or taken.
INBOX_PATCH = "event-inbox"
# Duplicate updates after this many recorded ones are answered by the validator, which writes
# nothing to history: a sender retrying in a loop cannot grow the run's history without bound.
DUPLICATES_RECORDED_MAX = 10

Action = Literal["apply", "keep", "duplicate", "refuse"]


@dataclass(frozen=True)
class Verdict:
    """What becomes of one event now, and what became of it before the inbox existed."""

    action: Action
    reason: str | None  # why the wait in progress did not take it (or why it is refused)
    legacy_applies: bool  # the rule before the inbox: the event was applied (else refused)
    legacy_reason: str | None


class DuplicateNotRecorded(EventRejected):
    """A duplicate the run answers without recording it (`DUPLICATES_RECORDED_MAX` are recorded)."""


def policy(run: Run) -> InboxPolicy:
    return run.definition.inbox or DEFAULT_POLICY


def judge(run: Run, event: ResumeEvent) -> Verdict:
    """Decide, without changing anything, what becomes of ``event`` (validators call it too)."""
    state = run.state
    if event.event_id in state.seen_event_ids:
        return Verdict("duplicate", None, True, None)
    legacy_reason = _legacy_problem(state, event)
    ending = state.ending_problem()
    if ending is not None:  # unwinding towards its end (endings.py): no wait will take it
        return Verdict("refuse", f"{ending}; {event.type} was not applied", legacy_reason is None, legacy_reason)
    # Going back to an earlier node (rewind_point.py), the run leaves the wait it is in, then
    # re-executes its record: events sent meanwhile are kept for its waits from that node on.
    going_back = run.going_back_to()
    waiting = state.waiting if state.resume_event is None and going_back is None else None
    reason = legacy_reason
    if waiting is not None and waiting.kind == EVENT_KINDS[event.type].waiting_for:
        reason = wait_problem(run, waiting, event)
        if reason is None and run.continuing:
            # Handing over to the next generation (its trail segment is being written): the
            # checkpoint carries the inbox, and the wait there takes the event from it.
            full = full_reason(state.inbox, policy(run), event_size(event))
            if full is not None:
                return Verdict("refuse", f"{full}; {event.type} was not kept", False, legacy_reason)
            return Verdict("keep", "the run is continuing as new", legacy_reason is None, legacy_reason)
        if reason is None:
            return Verdict("apply", None, legacy_reason is None, legacy_reason)
    legacy = legacy_reason is None
    if state.status.terminal:
        return Verdict("refuse", reason, legacy, legacy_reason)
    if run.replay is not None and going_back is None:  # a replay's waits take recorded events only
        return Verdict("refuse", f"{reason}; run {state.run_id} is a replay", legacy, legacy_reason)
    ahead = waits_ahead(
        run.definition,
        going_back or state.current_node,
        include_current=going_back is not None or state.waiting is None,
        fail_safe=not run.routed_to_fail_safe,
    )
    if not any(takes_kind(node, event) for node in ahead):
        return Verdict("refuse", _unwanted(state, event, ahead, reason, waiting), legacy, legacy_reason)
    full = full_reason(state.inbox, policy(run), event_size(event))
    if full is not None:
        return Verdict("refuse", f"{full}; {event.type} was not kept", legacy, legacy_reason)
    return Verdict("keep", reason, legacy, legacy_reason)


def check(run: Run, event: ResumeEvent) -> None:
    """The update validator's part: whether the run takes ``event``, before anything is written.

    Raises:
        EventRejected: The run would refuse it.
        DuplicateNotRecorded: A duplicate, and `DUPLICATES_RECORDED_MAX` duplicates are recorded already.
    """
    verdict = judge(run, event)
    if verdict.action == "refuse":
        raise EventRejected(verdict.reason or f"{event.type} was not applied")
    if verdict.action == "duplicate" and run.state.duplicates_recorded >= DUPLICATES_RECORDED_MAX:
        raise DuplicateNotRecorded(
            f"event {event.event_id!r} was applied already; duplicate not recorded "
            f"({DUPLICATES_RECORDED_MAX} duplicates recorded)"
        )


def take(run: Run, event: ResumeEvent, *, via: str) -> EventAck:
    """Apply, keep or refuse (EventRejected) one event that arrived through ``via``."""
    state = run.state
    verdict = judge(run, event)
    if verdict.action == "duplicate":
        return state.record_duplicate(event, via=via)
    action = verdict.action
    differs = action == "keep" or (action == "refuse" and verdict.legacy_applies)
    if differs and not patches.patched(INBOX_PATCH):
        if not verdict.legacy_applies:
            raise EventRejected(verdict.legacy_reason or f"{event.type} was not applied")
        action = "apply"
    if action == "refuse":
        raise EventRejected(verdict.reason or f"{event.type} was not applied")
    # Taken, applied or kept: the only place a run remembers an id, so a repeat is a duplicate.
    state.seen_event_ids.add(event.event_id)
    if via == "update":
        run.took_update(event.event_id, applied=action != "keep")
    if action == "keep":
        return _keep(run, event, via=via)
    return state.apply_now(event)


def _keep(run: Run, event: ResumeEvent, *, via: str) -> EventAck:
    state = run.state
    now = workflow.now()
    entry = InboxEntry(event=event, arrived_at=now, via=via, size=event_size(event))
    state.inbox.append(entry)
    expires = entry.expires_at(policy(run))
    state.audit.record(
        "EVENT_BUFFERED",
        at=now,
        stage=state.current_node,
        data={"eventType": event.type, "eventId": event.event_id, "via": via, "expiresAt": expires.isoformat()},
    )
    workflow.logger.info("Kept %s %s for %s until a wait takes it", event.type, event.event_id, state.run_id)
    return EventAck(
        event_id=event.event_id,
        accepted=True,
        buffered=True,
        status=state.status,
        detail=f"kept in the run's inbox for a wait ahead (until {expires.isoformat(timespec='seconds')})",
    )


# -- what a wait takes ------------------------------------------------------------------------


def wait_problem(run: Run, waiting: Waiting, event: ResumeEvent, scope: ConditionScope | None = None) -> str | None:
    """Why the wait in progress does not take ``event`` of its kind, or None.

    ``scope``: the run's activation, when the caller judges many events against one wait.
    """
    if event.type == "DOCUMENT_UPLOADED" and event.data["document"] not in waiting.requested:
        return _not_requested(event, waiting.requested)
    node = run.definition.nodes.get(waiting.node)
    if event.type == "TOOL_DECIDED":
        return decision_problem(getattr(node, "tools", None), waiting.data, event.data)
    if event.type == "BUDGET_DECIDED":
        return raise_problem(waiting.data, event.data)
    params = getattr(node, "parameters", None)
    if not isinstance(params, ExternalWaitOptions):
        return None
    # The wait's own (rendered) expectedFrom; a falsy one is not shown, so the parameter decides.
    expected = waiting.data.get("expectedFrom", getattr(params, "expected_from", None))
    sender = event.data.get("from")
    if expected is not None and sender is not None and sender != expected:
        # The reason may be recorded in the trail (EVENT_REJECTED): in a run about a data subject,
        # both senders are named there by keyed fingerprints, as RUN_WAITING names expectedFrom.
        key = run.fingerprint_key
        said, wanted = (sender, expected) if key is None else (fingerprint(sender, key), fingerprint(expected, key))
        return f"MESSAGE_RECEIVED.from: {said!r} is not the sender {waiting.node} expects ({wanted!r})"
    if params.match is None:
        return None
    changes = {
        "event": {"type": event.type, "eventId": event.event_id, "data": event.data},
        "waitingData": waiting.data,
    }
    try:
        if (scope or ConditionScope(activation(run))).evaluate(params.match, changes):
            return None
    except ConditionError as err:
        return f"{event.type} does not match {waiting.node}'s match: {err}"
    return f"{event.type} does not match {waiting.node}'s match ({params.match})"


def _unwanted(
    state: RunState, event: ResumeEvent, ahead: list[ExternalWaitNode], reason: str | None, waiting: Waiting | None
) -> str:
    """Why no wait, now or ahead, takes ``event``."""
    wanted = EVENT_KINDS[event.type].waiting_for
    if waiting is not None and waiting.kind == wanted:
        return f"{reason}; no later wait takes it"
    documents = [name for node in ahead if isinstance(node, RequestDocumentNode) for name in node.parameters.documents]
    if event.type == "DOCUMENT_UPLOADED" and documents:
        return _not_requested(event, list(dict.fromkeys(documents)))
    doing = f"waiting for {state.waiting.kind}" if state.waiting else str(state.status)
    article = "an" if wanted[:1] in "aeiou" else "a"
    return f"run {state.run_id} is {doing} and no wait ahead takes {article} {wanted}; {event.type} was not applied"


def _not_requested(event: ResumeEvent, requested: list[str]) -> str:
    return (
        f"DOCUMENT_UPLOADED.document: {event.data['document']!r} was not requested (requested: {', '.join(requested)})"
    )


def _legacy_problem(state: RunState, event: ResumeEvent) -> str | None:
    """Why the rule before the inbox refused ``event`` (it applied it when None)."""
    wanted = EVENT_KINDS[event.type].waiting_for
    waiting = state.waiting
    if waiting is None or state.resume_event is not None:
        status = state.status
        return f"run {state.run_id} is not waiting for a {wanted} (status: {status}); {event.type} was not applied"
    if waiting.kind != wanted:
        return f"run {state.run_id} is waiting for {waiting.kind}, not {wanted}; {event.type} was not applied"
    if event.type == "DOCUMENT_UPLOADED" and event.data["document"] not in waiting.requested:
        return _not_requested(event, waiting.requested)
    return None


# -- kept events --------------------------------------------------------------------------------


async def keep_inbox(run: Run) -> None:
    """Expire kept events when their time-to-live ends; runs for the whole workflow run.

    While the inbox is empty this waits on a condition alone, which writes nothing to history.
    """
    state, ttl = run.state, policy(run).ttl
    while True:
        await workflow.wait_condition(lambda: bool(state.inbox))
        oldest = state.inbox[0]
        remaining = oldest.arrived_at + ttl - workflow.now()
        if remaining > timedelta(0):
            try:
                await workflow.wait_condition(
                    lambda entry=oldest: not state.inbox or state.inbox[0] is not entry,  # type: ignore[misc]
                    timeout=remaining,
                )
                continue  # the oldest was taken: look again
            except TimeoutError:
                pass
        now = workflow.now()
        _expire(run, [entry for entry in state.inbox if entry.arrived_at + ttl <= now], "its time-to-live ended")


def unreachable(run: Run, node_id: str) -> list[InboxEntry]:
    """The kept events that no wait from ``node_id`` on can take."""
    state = run.state
    if not state.inbox:
        return []
    ahead = waits_ahead(run.definition, node_id, include_current=True, fail_safe=not run.routed_to_fail_safe)
    return [entry for entry in state.inbox if not any(takes_kind(node, entry.event) for node in ahead)]


def drop_unreachable(
    run: Run, node_id: str, stale: Iterable[InboxEntry], handed_on: Mapping[str, str] | None = None
) -> None:
    """Entering ``node_id``: expire the kept events no wait from here on can take (`unreachable`)."""
    _expire(run, list(stale), f"no wait from {node_id} on takes it", handed_on)


def drop_all(run: Run, reason: str, handed_on: Mapping[str, str] | None = None) -> None:
    """The run ends: whatever is still kept expires, each recorded (with the run it was handed on to)."""
    _expire(run, list(run.state.inbox), reason, handed_on or {})


def _expire(run: Run, entries: Iterable[InboxEntry], reason: str, handed_on: Mapping[str, str] | None = None) -> None:
    state = run.state
    for entry in entries:
        state.inbox.remove(entry)
        successor = (handed_on or {}).get(entry.event.event_id)
        extra = {"reason": reason, **({"handedOnTo": successor} if successor else {})}
        state.audit.record(
            "EVENT_EXPIRED",
            at=workflow.now(),
            stage=state.current_node,
            data=entry.audit_data(**extra),
        )
