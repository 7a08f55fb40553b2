"""A wait takes its kept events: judged in arrival order, within a budget per activation.

A wait that begins with events in the run's inbox judges each against its `match`. With a
costly `match` and a full inbox that work could take the workflow task past Temporal's deadlock
detector; one activation spends at most `JUDGING_BUDGET` on it, and the rest goes on in the next.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from dsmo.workflows.common import patches
from dsmo.workflows.definition.conditions import ConditionScope
from dsmo.workflows.events.resume_events import EVENT_KINDS, ResumeEvent
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.intake import wait_problem
from dsmo.workflows.run.routing import activation
from dsmo.workflows.run.state import Waiting

# workflow.patched id: a wait judges its kept events within JUDGING_BUDGET per activation.
BOUNDED_JUDGING_PATCH = "bounded-inbox-judging"
# Estimated element visits of the `match` evaluations one activation may spend on kept events
# (~1 s at the ~2 µs a visit measured here; Temporal's deadlock detector fires at 2 s).
JUDGING_BUDGET = 500_000
JUDGING_PAUSE = timedelta(milliseconds=1)


async def take_kept(run: Run, waiting: Waiting) -> ResumeEvent | None:
    """At the start of a wait: the oldest kept event it takes (every requested document kept).

    Returns the event that completes the wait, or None to wait as usual (a document wait may
    have taken some of its documents already). One activation judges kept events up to
    `JUDGING_BUDGET`; the rest are judged in the next one (a short timer), so a costly `match`
    over a full inbox cannot take the workflow task past Temporal's deadlock detector.
    """
    state = run.state
    judged: set[str] = set()  # event ids that do not match this wait
    while True:
        event, spent = _take_kept_within(run, waiting, judged, bounded=True)
        if not spent:
            return event
        if not patches.patched(BOUNDED_JUDGING_PATCH):
            # A run that judged its whole inbox in one activation before the budget existed.
            return _take_kept_within(run, waiting, judged, bounded=False)[0]
        await workflow.sleep(JUDGING_PAUSE)
        if state.resume_event is not None:  # an event applied to the wait meanwhile
            return None


def _take_kept_within(
    run: Run, waiting: Waiting, judged: set[str], *, bounded: bool
) -> tuple[ResumeEvent | None, bool]:
    """One activation's share of `take_kept`: the event taken, and whether the budget ran out."""
    state = run.state
    scope = ConditionScope(activation(run))  # once for the whole inbox, not once per kept event
    for entry in list(state.inbox):
        event = entry.event
        if event.event_id in judged:
            continue
        if bounded and scope.spent >= JUDGING_BUDGET:
            return None, True
        if EVENT_KINDS[event.type].waiting_for != waiting.kind or wait_problem(run, waiting, event, scope) is not None:
            judged.add(event.event_id)
            continue
        state.inbox.remove(entry)
        run.took_kept(event.event_id)
        state.audit.record(
            "EVENT_CONSUMED",
            at=workflow.now(),
            stage=waiting.node,
            data=entry.audit_data(via=entry.via),
        )
        if event.type == "DOCUMENT_UPLOADED" and state.receive_document(waiting, event, record_partial=False):
            continue
        return event, False
    return None, False
