"""A start's data subject: the definition's ``subject`` rendered from the input, with its keys.

The starter learns the keys before it writes the run's input (sealed with them) and passes them
in the request, so the run records its subject without a call of its own. If the store cannot be
reached now, the run learns them itself when it begins (a local activity).
"""

from __future__ import annotations

import asyncio
import logging

from temporalio.client import Client
from temporalio.service import RPCError

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.subject_keys import SubjectKeysMissing
from dsmo.client.client_errors import InvalidInputDocument
from dsmo.workflows.common import search_attributes as sa
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


# A new run re-doing another (replay, fork, redrive, what-if) names it here in its origin.
SOURCE_ORIGINS = ("replayOf", "forkOf", "redriveOf")


def source_run(request: ExecutionRequest) -> str | None:
    """The run a new run re-does, if it re-does one."""
    return next((request.origin[key] for key in SOURCE_ORIGINS if key in request.origin), None)


async def inherited_subject(request: ExecutionRequest, temporal: Client, store: ArtifactStore) -> ExecutionRequest:
    """A replay, fork or redrive of a run about a data subject its own definition does not name
    (it inherited its parent's) is about that subject too: its data is sealed with the same key.

    Raises:
        SubjectErased: The subject was erased (nothing of the original can be re-done).
    """
    source = source_run(request)
    if source is None or request.subject is not None or request.definition.subject is not None:
        return request
    try:
        described = await temporal.get_workflow_handle(source).describe()
    except RPCError:
        return request  # its history is gone: nothing says it had a subject (its objects would)
    subject = described.typed_search_attributes.get(sa.DATA_SUBJECT)
    if subject is None:
        return request
    key = await asyncio.to_thread(store.subjects.key_for, subject)
    return request.model_copy(update={"subject": key})


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
