from __future__ import annotations

import json

import pytest

from dsmo.workflows.events.resume_events import EventRejected, parse_signal, parse_update


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
        ({"event_id": "e" * 201, "text": "x"}, "use 1-200 printable characters"),
        ({"event_id": "e1\n", "text": "x"}, r"MESSAGE_RECEIVED.event_id 'e1\\n': use 1-200 printable"),
        ({"event_id": " e1", "text": "x"}, "without control characters or surrounding blanks"),
        ({"event_id": "e\x001", "text": "x"}, "without control characters"),
        ({"event_id": "e1", "text": "x", "extra": json.loads("[" * 40 + "]" * 40)}, "nested more than 32 levels deep"),
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


@pytest.mark.parametrize(
    ("event_type", "payload", "variables"),
    [
        ("MESSAGE_RECEIVED", {"text": "sí"}, {"lastResponse": "sí"}),
        (
            "SIGNATURE_COMPLETED",
            {"signedDocumentUrl": "s3://x", "signedAt": "2026-01-01T00:00:00Z"},
            {"signedDocumentUrl": "s3://x", "signedAt": "2026-01-01T00:00:00Z"},
        ),
        ("TEST_COMPLETED", {"score": 91, "result": "passed"}, {"testScore": 91, "testResult": "passed"}),
        (
            "EVENT_COMPLETED",
            {"result": "attended", "data": {"room": 1}},
            {"eventResult": "attended", "eventData": {"room": 1}},
        ),
    ],
)
def test_seed_variables_after_resume(event_type: str, payload: dict[str, object], variables: dict[str, object]) -> None:
    from dsmo.workflows.events.resume_events import variables_after

    event = parse_signal(event_type, {"event_id": "e", **payload})
    assert variables_after(event, {}, []) == variables


def test_document_urls_follow_the_requested_order() -> None:
    from dsmo.workflows.events.resume_events import variables_after

    event = parse_signal("DOCUMENT_UPLOADED", {"event_id": "e", "document": "a", "url": "u-a"})
    assert variables_after(event, {"b": "u-b", "a": "u-a"}, ["a", "b"]) == {"documentUrls": ["u-a", "u-b"]}


@pytest.mark.parametrize(
    ("event_type", "payload", "message"),
    [
        ("DOCUMENT_UPLOADED", {"document": "id"}, "DOCUMENT_UPLOADED.url: is required"),
        ("SIGNATURE_COMPLETED", {}, "SIGNATURE_COMPLETED.signedDocumentUrl: is required"),
        ("TEST_COMPLETED", {"score": "high", "result": "x"}, "TEST_COMPLETED.score"),
        ("TEST_COMPLETED", {"score": 1}, "TEST_COMPLETED.result: is required"),
    ],
)
def test_bad_payload_per_kind(event_type: str, payload: dict[str, object], message: str) -> None:
    with pytest.raises(EventRejected, match=message):
        parse_signal(event_type, {"event_id": "e", **payload})


@pytest.mark.parametrize(("score", "kept"), [(87, 87), (87.5, 87.5), (87.0, 87.0), ("87", 87), ("87.5", 87.5)])
def test_a_score_keeps_its_number_type(score: object, kept: object) -> None:
    data = parse_signal("TEST_COMPLETED", {"event_id": "e", "score": score, "result": "ok"}).data
    assert data["score"] == kept and type(data["score"]) is type(kept)


@pytest.mark.parametrize("score", [True, None, "high", "nan", [1]])
def test_a_score_must_be_a_finite_number(score: object) -> None:
    with pytest.raises(EventRejected, match=r"^TEST_COMPLETED\.score: must be a number$"):
        parse_signal("TEST_COMPLETED", {"event_id": "e", "score": score, "result": "ok"})
