"""A run's data subject and the keys its data is sealed with, as runs and activities pass them.

A definition may name the person its runs are about (`subject: "{{applicant.id}}"`). Everything
DSMO stores for such a run (input, stage outputs, model call records, dead letters, large event
values) is encrypted with that subject's data key; destroying the key erases it all at once.
The run never holds the data key in the clear: it carries the key wrapped by the deployment's
key-encryption key (`SubjectSeal`), which only an activity or a client holding that key opens.
"""

from __future__ import annotations

from dsmo.workflows.common.wire import WireModel

# The local activity a run calls when it must learn a subject's keys itself (a child naming a
# subject of its own, or a run started around DSMO's starter).
SUBJECT_KEY = "subject_key"


class SubjectSeal(WireModel):
    """What a writer needs to seal an artifact with a subject's data key.

    Attributes:
        fingerprint: The subject's keyed fingerprint (``hmac-sha256:<hex>``): names the subject
            in the key store, the trail and the erasure log without naming the person.
        key_id: Which of the subject's keys (a new one is made after an erasure).
        kek_id: The deployment key-encryption key that wrapped it.
        wrapped: The data key, wrapped (base64 of nonce and AES-GCM ciphertext).
    """

    fingerprint: str
    key_id: str
    kek_id: str
    wrapped: str


class SubjectKey(WireModel):
    """A run's subject: who it is, the seal for its artifacts, the key for its fingerprints.

    Attributes:
        subject: The subject's id as the definition rendered it (the ``DataSubject`` search attribute).
        seal: The wrapped data key artifacts are sealed with.
        hmac_key: Base64 key the trail's sensitive fingerprints are keyed with (derived from the
            data key, so it goes when the data key goes).
    """

    subject: str
    seal: SubjectSeal
    hmac_key: str


class SubjectKeyRequest(WireModel):
    """Ask for a subject's current keys, creating them if it has none."""

    subject: str
