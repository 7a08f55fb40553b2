"""The client's pre-checks of a resume event: refused before it is sent, in one line naming the field."""

from __future__ import annotations

import pytest

from dsmo import EventNotAccepted, parse_definition_text
from dsmo.starter.client.event_checks import check_event_data, check_event_id, initial_events

WAITS_FOR_A_REPLY = """
agent: asks
start: ask
nodes:
  ask:
    actionType: wait_for_response
    parameters: {timeout: 1h}
"""


def test_an_event_id_is_printable_and_bounded() -> None:
    check_event_id("order-17")
    with pytest.raises(EventNotAccepted) as err:
        check_event_id("x" * 201)
    assert "\n" not in str(err.value)


def test_event_data_must_be_unicode_json() -> None:
    check_event_data("MESSAGE_RECEIVED", {"text": "sí"})
    with pytest.raises(EventNotAccepted, match=r"MESSAGE_RECEIVED\.data: not valid Unicode JSON"):
        check_event_data("MESSAGE_RECEIVED", {"text": "\ud800"})


def test_events_with_a_start_must_be_taken_by_a_wait_of_the_definition() -> None:
    definition = parse_definition_text(WAITS_FOR_A_REPLY)
    (envelope,) = initial_events(definition, [{"type": "MESSAGE_RECEIVED", "data": {"text": "hi"}}])
    assert envelope["type"] == "MESSAGE_RECEIVED" and envelope["event_id"]  # a random id when none is given
    with pytest.raises(EventNotAccepted, match=r"events\.0: no wait of asks takes DOCUMENT_UPLOADED"):
        initial_events(definition, [{"type": "DOCUMENT_UPLOADED", "data": {"document": "id", "url": "s3://b/k"}}])
    with pytest.raises(EventNotAccepted, match=r"events\.0: must be an object"):
        initial_events(definition, ["MESSAGE_RECEIVED"])  # type: ignore[list-item]
