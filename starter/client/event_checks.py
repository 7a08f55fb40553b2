"""Checks a resume event passes before the client sends it: its id, its data's limits, and for
events sent with a start, that a wait of the definition takes it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from dsmo.starter.client.errors import EventNotAccepted
from dsmo.workflows.common.document_limits import EVENT_LIMITS, DocumentTooLarge, check_document
from dsmo.workflows.common.identifiers import event_id_problem
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.definition.waits_ahead import takes_kind, waits_ahead
from dsmo.workflows.events.resume_events import EventRejected, parse_update


def check_event_id(event_id: str) -> None:
    """An event id is the dedup key of an outside system's event: printable, 1-200 characters."""
    problem = event_id_problem(event_id)
    if problem:
        raise EventNotAccepted(problem)


def check_event_data(event_type: str, data: Any) -> None:
    """Depth, size and text limits of an event's data, before it is sent (one line naming the field)."""
    try:
        check_document(data, field=f"{event_type}.data", limits=EVENT_LIMITS)
        json.dumps(data, ensure_ascii=False).encode()
    except DocumentTooLarge as err:
        raise EventNotAccepted(f"{event_type} rejected: {err}") from None
    except (UnicodeEncodeError, ValueError, TypeError):
        raise EventNotAccepted(
            f"{event_type} rejected: {event_type}.data: not valid Unicode JSON (a lone surrogate?)"
        ) from None


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
            check_event_data(event.type, envelope["data"])
        except (EventRejected, EventNotAccepted) as err:
            raise EventNotAccepted(f"events.{index}: {err}") from None
        if not any(takes_kind(node, event) for node in waits):
            raise EventNotAccepted(f"events.{index}: no wait of {definition.agent} takes {event.type}")
        envelopes.append(envelope)
    return envelopes
