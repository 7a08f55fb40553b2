"""The console's task forms can send every field of their event, so any wait can be completed there."""

from __future__ import annotations

import pytest

from dsmo.server.api_keys import DECISION_EVENTS
from dsmo.server.console.forms import FORMS, TaskForm, event_data
from dsmo.workflows.events.resume_events import EVENT_KINDS, EventRejected, well_formed


@pytest.mark.parametrize("form", [form for form in FORMS.values() if form.fields], ids=lambda form: form.wait)
def test_a_form_has_every_field_of_its_event(form: TaskForm) -> None:
    # A wait's match and expectedFrom may read any of the event's fields: the form must send each.
    payload = EVENT_KINDS[form.event_type].payload
    fields = {field.alias or name for name, field in payload.model_fields.items()}
    names = {control.name for control in form.fields}
    # A decision's buttons send `decision`; who decided is the signed-in key, never typed in.
    given = ({"decision"} if form.choices else set()) | ({"by"} if form.event_type in DECISION_EVENTS else set())
    assert fields <= names | given | ({"data"} if "notes" in names else set())


def test_a_reply_form_sends_its_sender_and_thread() -> None:
    filled = {"text": "sí", "from": "postulant", "threadId": "T-42"}
    assert event_data(FORMS["response"], filled) == filled
    assert event_data(FORMS["response"], {"text": "sí", "from": "", "threadId": " "}) == {"text": "sí"}


def test_a_decision_form_sends_the_button_pressed_and_only_an_edit_sends_arguments() -> None:
    shown = {"callId": "call-1", "arguments": '{"order": "B-7", "amount": 120}', "reason": " "}
    approved = event_data(FORMS["approval"], {**shown, "decision": "approve"})
    assert approved == {"decision": "approve", "callId": "call-1"}
    edited = event_data(FORMS["approval"], {**shown, "decision": "edit", "arguments": '{"amount": 60}'})
    assert edited == {"decision": "edit", "callId": "call-1", "arguments": {"amount": 60}}
    well_formed("TOOL_DECIDED", "e-1", edited)  # what the form sends is an event every way in takes
    with pytest.raises(EventRejected) as refused:
        event_data(FORMS["approval"], {**shown, "decision": "edit", "arguments": "{amount"})
    assert refused.value.field == "arguments" and str(refused.value).startswith("TOOL_DECIDED.arguments: not JSON")
    # Approve with the arguments changed on the page would make the model's call: refused, not lost.
    proposed = {**shown, "proposed": '{"order": "B-7", "amount": 120}'}
    assert event_data(FORMS["approval"], {**proposed, "decision": "approve"})["decision"] == "approve"
    with pytest.raises(EventRejected, match="choose Edit and approve"):
        event_data(FORMS["approval"], {**proposed, "decision": "approve", "arguments": '{"amount": 60}'})


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"decision": "maybe"}, "TOOL_DECIDED.decision: Input should be 'approve', 'reject' or 'edit'"),
        ({"decision": "edit"}, "TOOL_DECIDED.arguments: give arguments with decision edit, and only then"),
        ({"decision": "approve", "arguments": {}}, "TOOL_DECIDED.arguments: give arguments with decision edit"),
    ],
)
def test_a_decision_that_is_not_one_is_refused_naming_the_field(data: dict[str, object], why: str) -> None:
    with pytest.raises(EventRejected) as refused:
        well_formed("TOOL_DECIDED", "e-1", data)
    assert why in str(refused.value)


def test_a_budget_form_sends_the_button_and_the_limits_typed() -> None:
    raised = event_data(FORMS["budget"], {"decision": "raise", "costUsd": "2.5", "tokens": " ", "reason": "long"})
    assert raised == {"decision": "raise", "costUsd": "2.5", "reason": "long"}
    assert well_formed("BUDGET_DECIDED", "e-1", raised).data["costUsd"] == 2.5
    assert event_data(FORMS["budget"], {"decision": "stop", "tokens": ""}) == {"decision": "stop"}


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"decision": "raise"}, "BUDGET_DECIDED.data: give tokens, costUsd or modelCalls with decision raise"),
        ({"decision": "stop", "tokens": 9}, "give tokens, costUsd or modelCalls with decision raise, and only then"),
        ({"decision": "raise", "costUsd": -1}, "BUDGET_DECIDED.costUsd: Input should be greater than 0"),
        ({"decision": "more"}, "BUDGET_DECIDED.decision: Input should be 'raise' or 'stop'"),
    ],
)
def test_a_budget_decision_that_is_not_one_is_refused_naming_the_field(data: dict[str, object], why: str) -> None:
    with pytest.raises(EventRejected) as refused:
        well_formed("BUDGET_DECIDED", "e-1", data)
    assert why in str(refused.value)
