"""A definition's data subject: the template that names whom a run is about, rendered at start.

The template reads only the run's input, like a concurrency key (`check_start_template`), so a
starter renders it before the run exists and refuses an input that lacks the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.definition.flow_control import FlowControlError, render_key


class SubjectMissing(DsmoError):
    """The input lacks the value a definition's ``subject`` reads (or it renders empty)."""

    code = "subject_missing"


def queryable(subject: str) -> bool:
    """Whether a subject id can go into a visibility query as it is (no quote, backslash or control character)."""
    return bool(subject) and not any(char in "'\"\\" or ord(char) < 32 for char in subject)


def render_subject(template: str, variables: Mapping[str, Any]) -> str:
    """The subject of a run with these input ``variables``.

    Raises:
        SubjectMissing: ``subject: ...`` naming the value the input lacks.
    """
    try:
        subject = render_key("subject", template, variables)
    except FlowControlError as err:
        raise SubjectMissing(str(err).replace("the key is longer", "the subject is longer")) from None
    if not queryable(subject):
        # It is looked up by a visibility query, where a quote would change what is asked.
        raise SubjectMissing(f"subject: {template!r} renders a value with a quote, backslash or control character")
    return subject
