"""Documents go from the browser straight to the object store, then the console delivers the event.

The page renders, per requested document, an HTML form that posts the file to the store with a
presigned POST policy: the object key must start with the upload's own prefix, the size is
capped, and the store redirects back to one exact console address. That address carries the
document, the event id fixed when the page was rendered and a signature bound to the session,
so it cannot be forged for another run, document or person. No JavaScript and no CORS needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from dsmo.server.console.session import Signer

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

MAX_UPLOAD_BYTES = 25 * 1024 * 1024
POLICY_SECONDS = 3600


@dataclass(frozen=True)
class UploadForm:
    """Where the browser posts one document, and the hidden fields the policy needs."""

    document: str
    event_id: str
    action: str
    fields: dict[str, str]


def upload_prefix(run_id: str, event_id: str) -> str:
    """Where one upload's object lives: its run and its event id."""
    return f"uploads/{run_id}/{event_id}/"


def return_path(signer: Signer, binding: str, run_id: str, document: str, event_id: str) -> str:
    """The console address the store sends the browser back to after the upload."""
    signature = signer.sign("upload", f"{binding}|{run_id}|{document}|{event_id}")
    parts = (quote(run_id, safe=""), quote(document, safe=""), quote(event_id, safe=""), signature)
    return "/console/runs/{}/uploaded/{}/{}/{}".format(*parts)


def sealed_upload_path(return_address: str) -> str:
    """Where a sealed upload posts (a run with a data subject, `sealed_uploads.py`): its return
    address, with ``upload`` for ``uploaded``."""
    return return_address.replace("/uploaded/", "/upload/", 1)


def return_valid(signer: Signer, binding: str, run_id: str, document: str, event_id: str, signature: str) -> bool:
    """Whether an upload's return address was issued to this session for this document."""
    return signer.verify("upload", f"{binding}|{run_id}|{document}|{event_id}", signature)


def upload_form(s3: S3Client, bucket: str, *, return_url: str, run_id: str, document: str, event_id: str) -> UploadForm:
    """A presigned POST for one document: the key under the upload's prefix, the size capped."""
    prefix = upload_prefix(run_id, event_id)
    conditions: list[Any] = [
        ["starts-with", "$key", prefix],
        {"success_action_redirect": return_url},
        ["content-length-range", 1, MAX_UPLOAD_BYTES],
    ]
    post = s3.generate_presigned_post(
        bucket,
        prefix + "${filename}",
        Fields={"success_action_redirect": return_url},
        Conditions=conditions,
        ExpiresIn=POLICY_SECONDS,
    )
    return UploadForm(document, event_id, post["url"], {k: str(v) for k, v in post["fields"].items()})
