"""Resume events from people and outside systems, validated before they touch a run.

Signals arrive as a flat JSON object (``{"event_id": ..., <kind's fields>}``); the
``deliver_event`` update as ``{"type": ..., "event_id": ..., "data": {...}}``. Both are
parsed from raw mappings here, so a bad event gets a clear reason instead of being dropped
by the SDK's decoder. What each event sets in the run's variables is decided here too.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dsmo.workflows.common.document_limits import EVENT_LIMITS, DocumentTooLarge, check_document
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import MAX_EVENT_ID, event_id_problem
from dsmo.workflows.common.wire import WireModel

# An event's data lands in the run's history and variables; big content belongs in an artifact.
# The same cap as the HTTP ingress's bodies, well under Temporal's 2 MB payload limit.
MAX_EVENT_BYTES = 64 * 1024
# The error type of a duplicate update the run answered without recording it (the client turns
# it back into a duplicate acknowledgement).
DUPLICATE_NOT_RECORDED = "DuplicateNotRecorded"


class EventRejected(DsmoError):
    """An event that cannot be applied; the message says why and names the field."""

    code = "event_rejected"


class _Payload(WireModel):
    model_config = ConfigDict(extra="ignore")


class MessageReceived(_Payload):
    """A reply from the person the run waits for (``waitingFor: response``)."""

    text: str = Field(min_length=1, max_length=20_000)
    sender: str | None = Field(default=None, alias="from", max_length=500)
    thread_id: str | int | None = None


class DocumentUploaded(_Payload):
    """One requested document arrived (``waitingFor: document``)."""

    document: str = Field(min_length=1, max_length=200)
    url: str = Field(min_length=1, max_length=2000)


class SignatureCompleted(_Payload):
    signed_document_url: str = Field(min_length=1, max_length=2000)
    signed_at: str | None = Field(default=None, max_length=50)


class TestCompleted(_Payload):
    __test__ = False  # not a pytest test class
    # An integer score stays an integer (87, not 87.0) in variables, audit and messages.
    score: int | float
    result: str = Field(min_length=1, max_length=200)

    @field_validator("score", mode="before")
    @classmethod
    def _a_number(cls, value: Any) -> Any:
        if isinstance(value, str):  # "87" from a form or a query string
            for number in (int, float):
                try:
                    value = number(value)
                    break
                except ValueError:
                    continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError("must be a number")
        return value


class EventCompleted(_Payload):
    """A calendar event took place (``waitingFor: event``)."""

    result: str = Field(default="completed", min_length=1, max_length=200)
    data: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class EventKind:
    waiting_for: str
    payload: type[BaseModel]


# Resume events people and systems send (the contract's signals), by name.
EVENT_KINDS: dict[str, EventKind] = {
    "MESSAGE_RECEIVED": EventKind("response", MessageReceived),
    "DOCUMENT_UPLOADED": EventKind("document", DocumentUploaded),
    "SIGNATURE_COMPLETED": EventKind("signature", SignatureCompleted),
    "TEST_COMPLETED": EventKind("test", TestCompleted),
    "EVENT_COMPLETED": EventKind("event", EventCompleted),
}
# Resumes that come from inside Temporal: a child run ending and a timer firing.
INTERNAL_EVENTS = {"agent": "AGENT_COMPLETED", "delay": "SCHEDULE_REACHED"}
RESUME_EVENT_FOR = {kind.waiting_for: name for name, kind in EVENT_KINDS.items()} | INTERNAL_EVENTS


class ResumeEvent(WireModel):
    type: str
    event_id: str
    data: dict[str, Any]

    @property
    def waiting_for(self) -> str:
        return EVENT_KINDS[self.type].waiting_for


class EventAck(WireModel):
    """The answer to a delivered event (`DsmoClient.deliver_event`, the ingress, `dsmo events send`).

    Attributes:
        event_id: The event's deduplication id.
        accepted: True when the run applied it, or kept it for a wait ahead (``buffered``).
        duplicate: True when an event with this id was already applied; nothing happened again.
        buffered: True when the run kept it in its inbox for a wait ahead (not applied yet).
        status: The run's status after the event.
        detail: A note for a person, if any.
    """

    event_id: str
    accepted: bool
    duplicate: bool = False
    buffered: bool = False
    status: str
    detail: str | None = None


def parse_signal(event_type: str, raw: Any, *, size_cap: bool = True, strict: bool = True) -> ResumeEvent:
    """A signal's flat payload -> ResumeEvent, or EventRejected.

    ``size_cap=False`` only for runs that took signals before MAX_EVENT_BYTES existed;
    ``strict=False`` skips strict_event_problem's rules, for events a run took before them.
    """
    if not isinstance(raw, dict):
        raise EventRejected(f"{event_type}: payload must be a JSON object, not {type(raw).__name__}")
    data = {key: value for key, value in raw.items() if key != "event_id"}
    if strict:
        _raise_if_not_strict(event_type, raw.get("event_id"), data)
    return _build(event_type, raw.get("event_id"), data, size_cap=size_cap)


def strict_event_problem(event_type: str, raw: Any) -> str | None:
    """Why a signal's payload breaks the event-id and shape rules, or None.

    The rules every way in applies (CLI, client, ingress, update validator): a printable event id
    and data within EVENT_LIMITS' depth, value count and text.
    """
    if not isinstance(raw, dict):
        return None  # parse_signal refuses it
    try:
        _raise_if_not_strict(event_type, raw.get("event_id"), {k: v for k, v in raw.items() if k != "event_id"})
    except EventRejected as err:
        return str(err)
    return None


def _raise_if_not_strict(event_type: str, event_id: Any, data: dict[str, Any]) -> None:
    if isinstance(event_id, str) and event_id.strip():  # a missing or blank id is _build's "is required"
        problem = event_id_problem(event_id)
        if problem:
            raise EventRejected(f"{event_type}.{problem}")
    try:
        check_document(data, field=f"{event_type}.data", limits=EVENT_LIMITS)
    except DocumentTooLarge as err:
        raise EventRejected(str(err)) from None


def parse_update(raw: Any, *, strict: bool = True) -> ResumeEvent:
    """The ``deliver_event`` update's envelope -> ResumeEvent, or EventRejected.

    ``strict=False`` only where updates accepted before the strict rules are replayed.
    """
    if not isinstance(raw, dict):
        raise EventRejected(f"event: must be a JSON object with type, event_id and data, not {type(raw).__name__}")
    unknown = sorted(set(raw) - {"type", "event_id", "data"})
    if unknown:
        raise EventRejected(f"event.{unknown[0]}: is not a known field (expected type, event_id, data)")
    data = raw.get("data", {})
    if not isinstance(data, dict):
        raise EventRejected("event.data: must be a JSON object")
    event_type = raw.get("type")
    if not isinstance(event_type, str):
        raise EventRejected(f"event.type: is required, one of {', '.join(EVENT_KINDS)}")
    if strict and event_type in EVENT_KINDS:
        _raise_if_not_strict(event_type, raw.get("event_id"), data)
    return _build(event_type, raw.get("event_id"), data)


def _build(event_type: str, event_id: Any, data: dict[str, Any], *, size_cap: bool = True) -> ResumeEvent:
    if event_type not in EVENT_KINDS:
        raise EventRejected(f"event.type: unknown event {event_type!r} (expected one of {', '.join(EVENT_KINDS)})")
    if not isinstance(event_id, str) or not event_id.strip():
        raise EventRejected(f"{event_type}.event_id: is required (a non-empty string that identifies the event)")
    if len(event_id) > MAX_EVENT_ID:
        raise EventRejected(f"{event_type}.event_id: longer than {MAX_EVENT_ID} characters")
    try:
        size = len(json.dumps(data, ensure_ascii=False, default=str).encode()) if size_cap else 0
    except (RecursionError, UnicodeEncodeError, ValueError) as err:
        # Such an event failed the workflow task before: refusing it changes no run that exists.
        reason = "nested too deep" if isinstance(err, RecursionError) else "not valid Unicode (a lone surrogate?)"
        raise EventRejected(f"{event_type}.data: {reason}") from None
    if size > MAX_EVENT_BYTES:
        raise EventRejected(
            f"{event_type}.data: {size} bytes, above the {MAX_EVENT_BYTES}-byte limit "
            "(store large content as an artifact and send its URI)"
        )
    try:
        payload = EVENT_KINDS[event_type].payload.model_validate(data)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"])
        reason = "is required" if first["type"] == "missing" else str(first["msg"]).removeprefix("Value error, ")
        raise EventRejected(f"{event_type}.{field}: {reason}") from None
    return ResumeEvent(type=event_type, event_id=event_id, data=payload.model_dump(mode="json", exclude_none=True))


# The variables variables_after sets, in the order of the event kinds.
EVENT_VARIABLES = (
    "lastResponse",
    "documentUrls",
    "signedDocumentUrl",
    "signedAt",
    "testScore",
    "testResult",
    "eventResult",
    "eventData",
)


def variables_after(event: ResumeEvent, received_documents: dict[str, str], requested: list[str]) -> dict[str, Any]:
    """The seed's variables a resume event sets."""
    data = event.data
    if event.type == "MESSAGE_RECEIVED":
        return {"lastResponse": data["text"]}
    if event.type == "DOCUMENT_UPLOADED":
        return {"documentUrls": [received_documents[name] for name in requested]}
    if event.type == "SIGNATURE_COMPLETED":
        return {"signedDocumentUrl": data["signedDocumentUrl"], "signedAt": data.get("signedAt")}
    if event.type == "TEST_COMPLETED":
        return {"testScore": data["score"], "testResult": data["result"]}
    if event.type == "EVENT_COMPLETED":
        return {"eventResult": data["result"], "eventData": data.get("data", {})}
    return {}
