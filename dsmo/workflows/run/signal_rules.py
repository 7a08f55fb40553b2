"""The rules a raw signal is held to, each behind the patch that added it.

A signal reaches a run without a validator, so the run itself judges it. A run took its signals by
the rules of its time, and must replay as it ran: each rule added later is asked behind a
`workflow.patched` marker, written only when a signal breaks that rule, so runs that never meet
one are unchanged.
"""

from __future__ import annotations

from typing import Any

from dsmo.workflows.common import patches
from dsmo.workflows.events.resume_events import EventRejected, ResumeEvent, parse_signal, strict_event_problem

# workflow.patched ids, oldest first.
EVENT_SIZE_CAP_PATCH = "event-size-cap"
# Raw signals are held to the same event-id and shape rules as every other way in.
STRICT_SIGNALS_PATCH = "strict-signals"
# A raw signal that breaks the strict rules and its kind's own rules too is refused for the strict
# one, as `well_formed` (so every other way in) refuses it; it was refused for its kind's before.
STRICT_RULES_FIRST_PATCH = "strict-signal-rules-first"
# A raw signal with a number JSON cannot hold (NaN, an infinity) is refused, as every way in refuses it.
JSON_NUMBERS_PATCH = "signal-json-numbers"


def well_formed_signal(event_type: str, payload: Any) -> ResumeEvent:
    """`well_formed`'s answer for a raw signal, the one every way in gets; older runs replay as they ran.

    Raises:
        EventRejected: The signal breaks a rule the run holds it to.
    """
    capped = patches.patched(EVENT_SIZE_CAP_PATCH)
    problem = strict_event_problem(event_type, payload, json_numbers=False)
    number_problem = None if problem else strict_event_problem(event_type, payload)
    try:
        event = parse_signal(event_type, payload, size_cap=capped, strict=False)
    except EventRejected:
        if problem and patches.patched(STRICT_RULES_FIRST_PATCH):
            raise EventRejected(problem) from None
        if number_problem and patches.patched(JSON_NUMBERS_PATCH):
            raise EventRejected(number_problem) from None
        raise
    if problem and patches.patched(STRICT_SIGNALS_PATCH):
        raise EventRejected(problem)
    if number_problem and patches.patched(JSON_NUMBERS_PATCH):
        raise EventRejected(number_problem)
    return event
