"""The client's pre-checks of a resume event: refused before it is sent, in one line naming the field."""

from __future__ import annotations

import pytest

from dsmo import EventMalformed, EventNotAccepted, parse_definition_text
from dsmo.client.event_checks import check_event, initial_events

WAITS_FOR_A_REPLY = """
agent: asks
start: ask
nodes:
  ask:
    actionType: wait_for_response
    parameters: {timeout: 1h}
"""


def test_a_malformed_event_is_refused_in_one_line_naming_the_field() -> None:
    check_event("MESSAGE_RECEIVED", "order-17", {"text": "sí"})
    with pytest.raises(EventMalformed) as too_long:
        check_event("MESSAGE_RECEIVED", "x" * 201, {"text": "sí"})
    assert "\n" not in str(too_long.value) and str(too_long.value).startswith("MESSAGE_RECEIVED rejected: ")
    with pytest.raises(EventMalformed) as surrogate:
        check_event("MESSAGE_RECEIVED", "order-17", {"text": "\ud800"})
    assert "MESSAGE_RECEIVED.data" in str(surrogate.value) and "\n" not in str(surrogate.value)


def test_events_with_a_start_must_be_taken_by_a_wait_of_the_definition() -> None:
    definition = parse_definition_text(WAITS_FOR_A_REPLY)
    (envelope,) = initial_events(definition, [{"type": "MESSAGE_RECEIVED", "data": {"text": "hi"}}])
    assert envelope["type"] == "MESSAGE_RECEIVED" and envelope["event_id"]  # a random id when none is given
    with pytest.raises(EventNotAccepted, match=r"events\.0: no wait of asks takes DOCUMENT_UPLOADED"):
        initial_events(definition, [{"type": "DOCUMENT_UPLOADED", "data": {"document": "id", "url": "s3://b/k"}}])
    with pytest.raises(EventNotAccepted, match=r"events\.0: must be an object"):
        initial_events(definition, ["MESSAGE_RECEIVED"])  # type: ignore[list-item]
