"""Resume events from people and outside systems, and the one rule for whether one is well formed.

`well_formed` is that rule. Every way in asks it before anything reaches a run's history:
DsmoClient before it sends (so the CLI, the ingress and the console too), and inside the run the
`deliver_event` update's validator and the raw signal handler. It is pure, so the client and the
run give the same answer, word for word. Signals arrive as a flat JSON object
(``{"event_id": ..., <kind's fields>}``) and the update as ``{"type": ..., "event_id": ...,
"data": {...}}``: `parse_signal` and `parse_update` unwrap those envelopes and ask `well_formed`,
so a bad event gets a clear reason instead of being dropped by the SDK's decoder. Whether the
run takes a well-formed event is the run's own judgement (`run/intake.py`). What each event sets
in the run's variables is decided here too.

Longer than most modules: each kind's payload model sits beside the one rule that reads it, so
what an event may hold and how it is judged are read in one place.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from dsmo.workflows.common.document_limits import EVENT_LIMITS, DocumentRefused, check_document
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
    """An event that cannot be applied; the message says why and names the field.

    Attributes:
        field: The field at fault by its wire name (``text``, ``score``, ``event_id``), or None
            when the problem is the event as a whole; a form shows ``reason`` beside it.
        reason: Why, without the field's name (the whole message when there is no field).
    """

    code = "event_rejected"

    def __init__(self, message: str, *, field: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.reason = reason or message


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


class ToolDecided(_Payload):
    """A person's decision on a tool call that waits for approval (``waitingFor: approval``).

    ``edit`` makes the call with ``arguments`` instead of the model's (held to the tool's schema
    by the run); ``reject`` makes no call, and the model reads ``reason`` as its result. ``by`` is
    set by the way in that knows who asks (the ingress and the console name the key). ``call``
    (``waitingData.call``: the turn's visit and the call's place, unique in the run) or ``callId``
    (the model's id, which turns may reuse) names the call decided: a decision for another call
    is refused.
    """

    decision: Literal["approve", "reject", "edit"]
    arguments: dict[str, Any] | None = Field(default=None, validate_default=True)
    reason: str | None = Field(default=None, min_length=1, max_length=2000)
    by: str | None = Field(default=None, min_length=1, max_length=200)
    call_id: str | None = Field(default=None, min_length=1, max_length=64)
    call: str | None = Field(default=None, min_length=1, max_length=120)

    @field_validator("arguments")
    @classmethod
    def _with_edit_only(cls, value: dict[str, Any] | None, info: ValidationInfo) -> dict[str, Any] | None:
        if (info.data.get("decision") == "edit") != (value is not None):
            raise ValueError("give arguments with decision edit, and only then")
        return value


class BudgetDecided(_Payload):
    """A person's decision on a run whose budget is spent (``waitingFor: budget``).

    ``raise`` gives new limits (``tokens``, ``costUsd``, ``modelCalls``: each replaces the
    budget's own; the run refuses limits it has already spent) and the run asks its model again;
    ``stop`` sends it where a spent budget goes (``onBudget``, else the fail-safe route). ``by``
    is set by the way in that knows who asks (the ingress and the console name the key).
    """

    decision: Literal["raise", "stop"]
    tokens: int | None = Field(default=None, ge=1)
    cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    model_calls: int | None = Field(default=None, ge=1, le=100_000)
    reason: str | None = Field(default=None, min_length=1, max_length=2000)
    by: str | None = Field(default=None, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _limits_with_raise_only(self) -> BudgetDecided:
        limits = (self.tokens, self.cost_usd, self.model_calls)
        if (self.decision == "raise") != any(limit is not None for limit in limits):
            raise ValueError("give tokens, costUsd or modelCalls with decision raise, and only then")
        return self


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
    "TOOL_DECIDED": EventKind("approval", ToolDecided),
    "BUDGET_DECIDED": EventKind("budget", BudgetDecided),
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


def well_formed(
    event_type: Any, event_id: Any, data: Any, *, size_cap: bool = True, strict: bool = True
) -> ResumeEvent:
    """Whether one event is well formed: the ResumeEvent, or EventRejected naming the field and why.

    The one judgement of an event's shape, for every way in (see the module's docstring). In
    order: the data is an object, the type is a known resume event, the strict rules (a printable
    event id, data within EVENT_LIMITS' depth, value count and text), an event id is given and
    not too long, the data as JSON within MAX_EVENT_BYTES, then the fields of the event's kind.

    Args:
        event_type: The event's type, one of EVENT_KINDS.
        event_id: The event's deduplication id.
        data: The event's data (its kind's fields, by their wire names).
        size_cap: False only where a run replays signals it took before MAX_EVENT_BYTES existed.
        strict: False only where a run replays events it took before the strict rules existed.

    Returns:
        The event, its data as its kind's model dumps it.

    Raises:
        EventRejected: The event is not well formed; one line naming the field and the reason.
    """
    if not isinstance(data, dict):
        raise _refused("event", "data", "must be a JSON object")
    kinds = ", ".join(EVENT_KINDS)
    if not isinstance(event_type, str):
        raise _refused("event", "type", f"is required, one of {kinds}")
    if event_type not in EVENT_KINDS:
        raise _refused("event", "type", f"unknown event {event_type!r} (expected one of {kinds})")
    if strict:
        _raise_if_not_strict(event_type, event_id, data)
    if not isinstance(event_id, str) or not event_id.strip():
        raise _refused(event_type, "event_id", "is required (a non-empty string that identifies the event)")
    if len(event_id) > MAX_EVENT_ID:
        raise _refused(event_type, "event_id", f"longer than {MAX_EVENT_ID} characters")
    try:
        size = len(json.dumps(data, ensure_ascii=False).encode()) if size_cap else 0
    except (RecursionError, ValueError, TypeError) as err:
        # Such an event failed the workflow task before: refusing it changes no run that exists.
        # (A payload decodes to JSON; only a caller's own object can be something else.)
        reason = "not valid Unicode (a lone surrogate?)" if isinstance(err, UnicodeEncodeError) else f"not JSON ({err})"
        raise _refused(event_type, "data", "nested too deep" if isinstance(err, RecursionError) else reason) from None
    if size > MAX_EVENT_BYTES:
        limit = f"above the {MAX_EVENT_BYTES}-byte limit (store large content as an artifact and send its URI)"
        raise _refused(event_type, "data", f"{size} bytes, {limit}")
    try:
        payload = EVENT_KINDS[event_type].payload.model_validate(data)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"]) or "data"  # a check of the whole event
        reason = "is required" if first["type"] == "missing" else str(first["msg"]).removeprefix("Value error, ")
        raise _refused(event_type, field, reason) from None
    return ResumeEvent(type=event_type, event_id=event_id, data=payload.model_dump(mode="json", exclude_none=True))


def _refused(where: str, field: str, reason: str) -> EventRejected:
    return EventRejected(f"{where}.{field}: {reason}", field=field, reason=reason)


def parse_signal(event_type: str, raw: Any, *, size_cap: bool = True, strict: bool = True) -> ResumeEvent:
    """A signal's flat payload (``{"event_id": ..., <fields>}``) -> `well_formed`'s answer.

    Raises:
        EventRejected: The payload is not an object, or `well_formed` refused the event.
    """
    if not isinstance(raw, dict):
        raise EventRejected(f"{event_type}: payload must be a JSON object, not {type(raw).__name__}")
    data = {key: value for key, value in raw.items() if key != "event_id"}
    return well_formed(event_type, raw.get("event_id"), data, size_cap=size_cap, strict=strict)


def strict_event_problem(event_type: str, raw: Any, *, json_numbers: bool = True) -> str | None:
    """Why a signal's payload breaks `well_formed`'s strict rules, or None.

    The raw signal handler asks this apart from the rest of `well_formed`, because a run that
    took signals before the strict rules existed must replay as it ran (a `workflow.patched`
    marker is written only when a signal breaks them). ``json_numbers=False`` leaves out the
    newest rule (numbers JSON can hold), which has a patch of its own.
    """
    if not isinstance(raw, dict):
        return None  # parse_signal refuses it
    data = {k: v for k, v in raw.items() if k != "event_id"}
    try:
        _raise_if_not_strict(event_type, raw.get("event_id"), data, json_numbers=json_numbers)
    except EventRejected as err:
        return str(err)
    return None


def _raise_if_not_strict(event_type: str, event_id: Any, data: dict[str, Any], *, json_numbers: bool = True) -> None:
    if isinstance(event_id, str) and event_id.strip():  # a missing or blank id is well_formed's "is required"
        problem = event_id_problem(event_id)
        if problem:
            raise EventRejected(f"{event_type}.{problem}", field="event_id")
    try:
        limits = EVENT_LIMITS if json_numbers else replace(EVENT_LIMITS, json_numbers=False)
        check_document(data, field=f"{event_type}.data", limits=limits)
    except DocumentRefused as err:
        raise EventRejected(str(err), field="data") from None


def parse_update(raw: Any, *, strict: bool = True) -> ResumeEvent:
    """The ``deliver_event`` update's envelope (``{"type", "event_id", "data"}``) -> `well_formed`'s answer.

    ``strict=False`` only where updates accepted before the strict rules are replayed.

    Raises:
        EventRejected: The envelope is not an object or has an unknown field, or `well_formed`
            refused the event.
    """
    if not isinstance(raw, dict):
        raise EventRejected(f"event: must be a JSON object with type, event_id and data, not {type(raw).__name__}")
    unknown = sorted(set(raw) - {"type", "event_id", "data"})
    if unknown:
        raise EventRejected(f"event.{unknown[0]}: is not a known field (expected type, event_id, data)")
    return well_formed(raw.get("type"), raw.get("event_id"), raw.get("data", {}), strict=strict)


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
    if event.type == "TOOL_DECIDED":
        return {"approval": dict(data)}
    if event.type == "BUDGET_DECIDED":
        return {"budgetDecision": dict(data)}
    return {}
