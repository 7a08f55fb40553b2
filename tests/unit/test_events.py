from __future__ import annotations

import pytest

from workflows.events import EventRejected, parse_signal, parse_update


def test_signal_payload_is_flat_with_event_id() -> None:
    event = parse_signal("MESSAGE_RECEIVED", {"event_id": "e1", "text": "si", "from": "+34", "extra": 1})
    assert (event.type, event.event_id, event.data) == ("MESSAGE_RECEIVED", "e1", {"text": "si", "from": "+34"})
    assert event.waiting_for == "response"


def test_update_envelope() -> None:
    event = parse_update({"type": "MESSAGE_RECEIVED", "event_id": "e2", "data": {"text": "ok"}})
    assert event.data == {"text": "ok"}


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"text": "x"}, "MESSAGE_RECEIVED.event_id: is required"),
        ({"event_id": "", "text": "x"}, "event_id: is required"),
        ({"event_id": "e" * 201, "text": "x"}, "longer than 200"),
        ({"event_id": "e"}, "MESSAGE_RECEIVED.text: is required"),
        ({"event_id": "e", "text": ""}, "MESSAGE_RECEIVED.text"),
        ("just text", "payload must be a JSON object"),
        (None, "payload must be a JSON object"),
    ],
)
def test_bad_signal_payloads(payload: object, message: str) -> None:
    with pytest.raises(EventRejected, match=message):
        parse_signal("MESSAGE_RECEIVED", payload)


@pytest.mark.parametrize(
    ("envelope", "message"),
    [
        ({"type": "DOCUMENT_SHREDDED", "event_id": "e", "data": {}}, "unknown event 'DOCUMENT_SHREDDED'"),
        ({"event_id": "e", "data": {"text": "x"}}, "event.type: is required"),
        ({"type": "MESSAGE_RECEIVED", "event_id": "e", "data": []}, "event.data: must be a JSON object"),
        ({"type": "MESSAGE_RECEIVED", "event_id": "e", "data": {}, "extra": 1}, "event.extra: is not a known field"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_bad_update_envelopes(envelope: object, message: str) -> None:
    with pytest.raises(EventRejected, match=message):
        parse_update(envelope)
