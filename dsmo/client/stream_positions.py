"""Where a run's live stream stands after a trail that was read some other way (a page drawn).

A reader that shows a run's trail, then follows its stream from the trail's last event, must not
lose what stage attempts still open at that point write: a model's answer under way began before
that event, so a stream from the bare sequence number never learns of it. The position given here
is the one the stream itself (`client/run_stream.py`) would have given right after that event, with
each attempt still open read from its start: the rest of the trail follows once, and every open
attempt's tokens, from the first.
"""

from __future__ import annotations

from collections.abc import Sequence

from dsmo.client.run_stream import StreamCursor, attempt_begun_by, ends_attempt
from dsmo.workflows.contracts.run_records import ENDING_EVENTS, AuditEvent


def position_after(trail: Sequence[AuditEvent]) -> str:
    """The stream position (an item's ``id``, for ``after``) right after ``trail``'s last event.

    Args:
        trail: The run's trail from its first event, in order (as `DsmoClient.events` gives it).

    Returns:
        The position: the last event's sequence number and the attempts still open then, each
        at its first token. Empty for an empty trail (the stream's start).
    """
    if not trail:
        return ""
    cursor = StreamCursor()
    # The stream's own rules (which event begins an attempt, which ends one), so the position is
    # one the stream could have given and a resumed stream neither repeats nor skips anything.
    for event in trail:
        for name, followed in list(cursor.attempts.items()):
            if ends_attempt(event, followed):
                del cursor.attempts[name]
        began = attempt_begun_by(event)
        if began is not None and began.name not in cursor.attempts:
            cursor.attempts[began.name] = began
        if event.type in ENDING_EVENTS:
            cursor.attempts.clear()  # the run has ended: nothing of it is still being written
        cursor.seq = event.seq
    return cursor.id()
