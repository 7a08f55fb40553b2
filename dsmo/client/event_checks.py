"""Checks a resume event passes before the client sends it: well formed by the run's own rule,
and for events sent with a start, taken by a wait of the definition."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from dsmo.client.client_errors import EventMalformed, EventNotAccepted
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.definition.waits_ahead import takes_kind, waits_ahead
from dsmo.workflows.events.resume_events import EventRejected, parse_update, well_formed


def check_event(event_type: str, event_id: Any, data: Any) -> None:
    """Refuse a malformed event before it is sent, by the run's own rule (`well_formed`).

    The run's validator asks the same function, so this answer and the run's are the same words;
    the round trip is saved and nothing reaches the run.

    Args:
        event_type: The event's type.
        event_id: Its deduplication id.
        data: Its data.

    Raises:
        EventMalformed: The event is not well formed (the message names the field and why).
    """
    try:
        well_formed(event_type, event_id, data)
    except EventRejected as problem:
        raise EventMalformed(f"{event_type} rejected: {problem}", problem) from None


def initial_events(definition: AgentDefinition, events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Events to deliver with a start, as ``deliver_event`` envelopes, or EventNotAccepted naming the one.

    Each is checked as the update's validator would, and against the definition: a wait of the
    graph must take it, or the run would refuse it once started.
    """
    waits = waits_ahead(definition, None, include_current=True, fail_safe=True)
    envelopes = []
    for index, raw in enumerate(events):
        if not isinstance(raw, Mapping):
            raise EventNotAccepted(f"events.{index}: must be an object with type, data and event_id")
        envelope = {
            "type": raw.get("type"),
            "event_id": raw.get("event_id") or raw.get("eventId") or str(uuid.uuid4()),
            "data": raw.get("data", {}),
        }
        try:
            event = parse_update(envelope)
        except EventRejected as problem:
            raise EventMalformed(f"events.{index}: {problem}", problem) from None
        if not any(takes_kind(node, event) for node in waits):
            raise EventNotAccepted(f"events.{index}: no wait of {definition.agent} takes {event.type}")
        envelopes.append(envelope)
    return envelopes
