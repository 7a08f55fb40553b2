"""The console's task forms can send every field of their event, so any wait can be completed there."""

from __future__ import annotations

import pytest

from dsmo.server.console.forms import FORMS, TaskForm, event_data
from dsmo.workflows.events.resume_events import EVENT_KINDS


@pytest.mark.parametrize("form", [form for form in FORMS.values() if form.fields], ids=lambda form: form.wait)
def test_a_form_has_every_field_of_its_event(form: TaskForm) -> None:
    # A wait's match and expectedFrom may read any of the event's fields: the form must send each.
    payload = EVENT_KINDS[form.event_type].payload
    fields = {field.alias or name for name, field in payload.model_fields.items()}
    names = {control.name for control in form.fields}
    assert fields <= names | ({"data"} if "notes" in names else set())


def test_a_reply_form_sends_its_sender_and_thread() -> None:
    filled = {"text": "sí", "from": "postulant", "threadId": "T-42"}
    assert event_data(FORMS["response"], filled) == filled
    assert event_data(FORMS["response"], {"text": "sí", "from": "", "threadId": " "}) == {"text": "sí"}
