"""Documents for a run with a data subject: posted to the console, sealed, then stored.

A run about a data subject keeps everything it stores sealed with that subject's key
(`docs/data-lifecycle.md`). A browser posting straight to the object store (`uploads.py`) would
leave the document there in the clear, so for such a run the form posts to the console instead:
it reads the file (capped as the store's policy caps it), seals it with the run's subject key
under the same key an upload gets, and delivers ``DOCUMENT_UPLOADED`` as the return address does.
"""

from __future__ import annotations

import asyncio
from pathlib import PurePosixPath
from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import RedirectResponse

from dsmo.server.console.auth import CONSOLE, CSRF_FIELD, ConsoleProblem, Viewer, check_csrf, signed_in
from dsmo.server.console.form_actions import ack_notice, changed_run, require_scope, within_event_rate
from dsmo.server.console.uploads import MAX_UPLOAD_BYTES, return_valid, upload_prefix
from dsmo.server.console.web import checked_run_id, console
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.errors import DsmoError

router = APIRouter(prefix=CONSOLE, include_in_schema=False)


@router.post("/runs/{run_id}/upload/{document}/{event_id}/{signature}")
async def upload_sealed(
    request: Request,
    run_id: str,
    document: str,
    event_id: str,
    signature: str,
    file: Annotated[UploadFile, File()],
    csrf_token: str = Form(default="", alias=CSRF_FIELD),
    viewer: Viewer = Depends(signed_in),
) -> RedirectResponse:
    check_csrf(viewer, csrf_token)
    require_scope(viewer, "events:DOCUMENT_UPLOADED")
    checked_run_id(run_id)
    if not return_valid(viewer.signer, viewer.session.binding, run_id, document, event_id, signature):
        raise ConsoleProblem(403, "upload: this address was not issued to this session")
    within_event_rate(request, viewer)
    body = await file.read(MAX_UPLOAD_BYTES + 1)
    if not body or len(body) > MAX_UPLOAD_BYTES:
        raise ConsoleProblem(413 if body else 422, f"file: between 1 byte and {MAX_UPLOAD_BYTES // 2**20} MiB")
    app = console(request)
    described = await app.dsmo.run(run_id).describe()
    subject = described.typed_search_attributes.get(sa.DATA_SUBJECT)
    if subject is None:
        raise ConsoleProblem(409, f"run {run_id} has no data subject; upload the document the usual way")
    name = PurePosixPath(file.filename or document).name or document
    key = upload_prefix(run_id, event_id) + name
    subject_key = await asyncio.to_thread(app.store.subjects.key_for, subject)
    content_type = file.content_type or "application/octet-stream"
    await asyncio.to_thread(
        lambda: app.store.put_json_bytes_once(key, body, content_type=content_type, seal=subject_key.seal)
    )
    try:
        ack = await app.dsmo.deliver_event(
            run_id, "DOCUMENT_UPLOADED", {"document": document, "url": app.store.uri(key)}, event_id=event_id
        )
    except DsmoError as err:
        raise ConsoleProblem(409, str(err)) from None
    return changed_run(request, run_id, ack_notice(ack))
