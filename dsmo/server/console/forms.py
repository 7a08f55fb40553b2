"""The forms that complete a task, one per wait kind, and how a filled form becomes an event.

Each form names the resume event it delivers and its fields (the event's data, by their wire
names). A filled form's event is judged by `well_formed`, as every way in's is, and a refusal is
shown next to the field it names; documents are uploaded by the browser straight to the object
store (see `uploads`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsmo.workflows.events.resume_events import EventRejected


@dataclass(frozen=True)
class Field:
    """One control of a form."""

    name: str
    label: str
    kind: str = "text"  # an <input> type, or "textarea"
    required: bool = True
    hint: str = ""
    default_from: str | None = None  # a key of the wait's data that fills it in (an object as JSON)


@dataclass(frozen=True)
class TaskForm:
    """The form of one wait kind: the event it delivers and its controls."""

    wait: str
    event_type: str
    title: str
    submit: str
    fields: tuple[Field, ...] = ()
    # Buttons that each submit the form with their value as ``decision``, instead of one submit.
    choices: tuple[tuple[str, str], ...] = ()


FORMS: dict[str, TaskForm] = {
    form.wait: form
    for form in (
        TaskForm(
            "response",
            "MESSAGE_RECEIVED",
            "Reply",
            "Send reply",
            (
                Field("text", "Reply", "textarea"),
                # What a wait's expectedFrom and match may read, filled in with what the wait shows.
                Field("from", "From", required=False, hint="who replies", default_from="expectedFrom"),
                Field("threadId", "Thread", required=False, hint="the conversation's thread", default_from="threadId"),
            ),
        ),
        TaskForm("document", "DOCUMENT_UPLOADED", "Documents", "Upload"),
        TaskForm(
            "signature",
            "SIGNATURE_COMPLETED",
            "Signature",
            "Mark as signed",
            (
                Field("signedDocumentUrl", "Signed document URL", "url", default_from="document"),
                Field("signedAt", "Signed at", required=False, hint="for example 2026-11-23T10:00:00Z"),
            ),
        ),
        TaskForm(
            "test",
            "TEST_COMPLETED",
            "Test result",
            "Record result",
            (
                Field("score", "Score", "number"),
                Field("result", "Result", hint="for example passed or failed"),
            ),
        ),
        TaskForm(
            "approval",
            "TOOL_DECIDED",
            "Decide the tool call",
            "Decide",
            (
                Field("call", "Call", "hidden", default_from="call"),
                Field("proposed", "Proposed arguments", "hidden", default_from="arguments"),
                Field("callId", "Call id", "hidden", default_from="callId"),
                Field(
                    "arguments",
                    "Arguments",
                    "textarea",
                    required=False,
                    hint="JSON; change them and choose Edit and approve to make the call with yours",
                    default_from="arguments",
                ),
                Field("reason", "Reason", "textarea", required=False, hint="kept in the trail; the model reads it"),
            ),
            (("approve", "Approve"), ("edit", "Edit and approve"), ("reject", "Reject")),
        ),
        TaskForm(
            "budget",
            "BUDGET_DECIDED",
            "Raise the budget",
            "Decide",
            (
                Field("tokens", "Tokens", "number", required=False, hint="the new limit; leave empty to keep it"),
                Field("costUsd", "Cost (USD)", "number", required=False, hint="the new limit in US dollars"),
                Field("modelCalls", "Model calls", "number", required=False, hint="the new limit of model calls"),
                Field("reason", "Reason", "textarea", required=False, hint="kept in the trail"),
            ),
            (("raise", "Raise and go on"), ("stop", "Stop")),
        ),
        TaskForm(
            "event",
            "EVENT_COMPLETED",
            "Event",
            "Mark as completed",
            (
                Field("result", "Result", required=False, hint="completed if left empty"),
                Field("notes", "Notes", "textarea", required=False),
            ),
        ),
    )
}


def event_data(form: TaskForm, filled: Mapping[str, str]) -> dict[str, Any]:
    """The event's data from a filled form: empty optional fields left out, notes under ``data``.

    Raises:
        EventRejected: A decision's edited arguments are not JSON (named, as `well_formed` names).
    """
    if form.wait == "approval":
        return _decision(filled)
    # A form with buttons (a budget's raise or stop) sends the one pressed.
    data: dict[str, Any] = {"decision": (filled.get("decision") or "").strip()} if form.choices else {}
    for control in form.fields:
        value = (filled.get(control.name) or "").strip()
        if not value:
            continue
        if form.wait == "event" and control.name == "notes":
            data["data"] = {"notes": value}
        else:
            data[control.name] = value
    return data


def _decision(filled: Mapping[str, str]) -> dict[str, Any]:
    """A decision from the approval form: the button pressed, the call, and for an edit the arguments."""
    decision = (filled.get("decision") or "").strip()
    data: dict[str, Any] = {"decision": decision}
    for name in ("call", "callId", "reason"):
        value = (filled.get(name) or "").strip()
        if value:
            data[name] = value
    typed = filled.get("arguments") or ""
    if decision == "edit":
        try:
            data["arguments"] = json.loads(typed)
        except ValueError:
            reason = "not JSON: write the arguments as a JSON object"
            raise EventRejected(f"TOOL_DECIDED.arguments: {reason}", field="arguments", reason=reason) from None
    elif decision == "approve" and "proposed" in filled and _changed(typed, filled["proposed"]):
        # Approve makes the call as the model asked: arguments changed on the page would be lost.
        reason = "changed: choose Edit and approve to make the call with them, or undo the change"
        raise EventRejected(f"TOOL_DECIDED.arguments: {reason}", field="arguments", reason=reason)
    return data


def _changed(typed: str, proposed: str) -> bool:
    """Whether the arguments on the page are not the ones the model proposed (as JSON values)."""
    try:
        return bool(json.loads(typed) != json.loads(proposed))
    except ValueError:
        return typed.strip() != proposed.strip()


def field_errors(form: TaskForm | None, problem: EventRejected) -> dict[str, str]:
    """Where the page's ``form`` shows why an event is not well formed: beside its field, else above.

    ``problem`` is `well_formed`'s answer (DsmoClient asks it before sending), so the console says
    what every other way in says: the reason beside the field it names, or the whole line.
    """
    if form is not None and problem.field in {control.name for control in form.fields}:
        return {problem.field: problem.reason}
    return {"_form": str(problem)}
