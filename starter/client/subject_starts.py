"""A start's data subject: the definition's ``subject`` rendered from the input, with its keys.

The starter learns the keys before it writes the run's input (sealed with them) and passes them
in the request, so the run records its subject without a call of its own. If the store cannot be
reached now, the run learns them itself when it begins (a local activity).
"""

from __future__ import annotations

import asyncio
import logging

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.subject_keys import SubjectKeysMissing
from dsmo.starter.client.client_errors import InvalidInputDocument
from dsmo.workflows.contracts.run_records import ExecutionRequest
from dsmo.workflows.definition.subjects import SubjectMissing, render_subject

log = logging.getLogger(__name__)


def rendered_subject(request: ExecutionRequest) -> str | None:
    """The subject a new run of ``request`` is about, or None when its definition names none.

    Raises:
        InvalidInputDocument: The input lacks the value the subject reads (``input: subject: ...``).
    """
    template = request.definition.subject
    if template is None or request.checkpoint is not None:
        return None
    try:
        return render_subject(template, request.input)
    except SubjectMissing as err:
        raise InvalidInputDocument(f"input: {err}") from None


async def with_subject(request: ExecutionRequest, store: ArtifactStore) -> ExecutionRequest:
    """``request`` with its subject's keys, made now if the subject has none.

    Raises:
        InvalidInputDocument: The input lacks the value the subject reads.
        SubjectKeysMissing: No key-encryption key is configured.
    """
    subject = rendered_subject(request)
    if subject is None or (request.subject is not None and request.subject.subject == subject):
        return request
    try:
        key = await asyncio.to_thread(store.subjects.key_for, subject)
    except SubjectKeysMissing:
        raise
    except Exception as err:  # noqa: BLE001 - the run learns its keys itself when it begins
        log.warning("the subject's keys could not be read now (%s); the run will learn them", err)
        return request
    return request.model_copy(update={"subject": key})
