"""Data subjects' keys: made on first need, kept wrapped in the store, destroyed to erase a subject.

Each subject has one data key at a time, at ``subjects/keys/<fingerprint hex>.json``, wrapped
(AES-GCM) by the deployment's key-encryption key, the way the payload codec's keys are given
(``id:base64`` entries; the first wraps new keys, all unwrap). A subject is named everywhere by
its fingerprint: an HMAC of its id under a key derived from the *last* key-encryption key (the
oldest: new ones are prepended), so the name stays put while keys rotate and a guessed id
cannot be checked against it without that key.

Erasing a subject deletes its key record. Its sealed objects stay in the bucket and can no
longer be opened by anyone; a later run of the same subject gets a new key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from dsmo.activities.sealing import NONCE_BYTES, SealedHeader
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.subject_io import SubjectKey, SubjectSeal


class KeyRecordStore(Protocol):
    """What the keyring needs of the artifact store (which seals with the keyring, so it is named
    here by shape, not imported): conditional writes, reads, and the bucket for deletes."""

    bucket: str

    @property
    def s3(self) -> Any: ...

    def stored_or_none(self, key: str) -> bytes | None: ...

    def put_if_absent(
        self, key: str, body: bytes, content_type: str = ..., metadata: dict[str, str] | None = ...
    ) -> bool: ...


KEYS_PREFIX = "subjects/keys/"
FINGERPRINT_PREFIX = "hmac-sha256:"


class SubjectKeysMissing(DsmoError):
    """No key-encryption key is configured, so no subject's data can be sealed."""

    code = "subject_keys_missing"


class SubjectErased(DsmoError):
    """The subject's key is gone: what was sealed with it cannot be read by anyone."""

    code = "artifact_erased"


def key_record_key(fingerprint: str) -> str:
    return f"{KEYS_PREFIX}{fingerprint.removeprefix(FINGERPRINT_PREFIX)}.json"


def hmac_key_of(data_key: bytes) -> bytes:
    """The key a subject's sensitive fingerprints are keyed with: derived, so it goes with the data key."""
    return hmac.new(data_key, b"dsmo sensitive fingerprints", hashlib.sha256).digest()


class SubjectKeyring:
    """The subjects' data keys over one artifact store and the deployment's key-encryption keys."""

    def __init__(self, store: KeyRecordStore, keks: Sequence[tuple[str, bytes]]) -> None:
        self.store = store
        self._keks = {kek_id: AESGCM(key) for kek_id, key in keks}
        self._active = keks[0][0] if keks else None
        self._naming = hmac.new(keks[-1][1], b"dsmo subject names", hashlib.sha256).digest() if keks else None
        # Unwrapped data keys by their wrapped form: holding the wrapped form is holding the key.
        self._unwrapped: dict[str, bytes] = {}
        self._seen: set[str] = set()  # fingerprints of subjects whose key this process has met
        self._lock = threading.Lock()

    @property
    def configured(self) -> bool:
        return self._active is not None

    def fingerprint(self, subject: str) -> str:
        """The subject's name in the key store, the trail and the erasure log."""
        if self._naming is None:
            raise SubjectKeysMissing(_MISSING)
        return FINGERPRINT_PREFIX + hmac.new(self._naming, subject.encode(), hashlib.sha256).hexdigest()

    def key_for(self, subject: str) -> SubjectKey:
        """The subject's current keys, made now if it has none (a race to make them has one winner)."""
        fingerprint = self.fingerprint(subject)
        # A subject seen here before most likely has a key: read it. Any other is most likely new:
        # make its key with one create-only write (which finds an existing key as well).
        record = self.record(fingerprint) if fingerprint in self._seen else None
        if record is None:
            record = self._create(fingerprint)
        with self._lock:
            if len(self._seen) >= 10_000:
                self._seen.clear()
            self._seen.add(fingerprint)
        seal = SubjectSeal(
            fingerprint=fingerprint, key_id=record["keyId"], kek_id=record["kekId"], wrapped=record["wrapped"]
        )
        hmac_key = hmac_key_of(self.data_key(seal))
        return SubjectKey(subject=subject, seal=seal, hmac_key=base64.b64encode(hmac_key).decode())

    def data_key(self, seal: SubjectSeal) -> bytes:
        """The data key a run's seal wraps."""
        with self._lock:
            found = self._unwrapped.get(seal.wrapped)
        if found is not None:
            return found
        kek = self._keks.get(seal.kek_id)
        if kek is None:
            raise SubjectKeysMissing(f"subject keys: key-encryption key {seal.kek_id!r} is not configured")
        raw = base64.b64decode(seal.wrapped)
        try:
            key = kek.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _wrap_context(seal.fingerprint, seal.key_id))
        except InvalidTag:
            raise SubjectKeysMissing(f"subject keys: key {seal.key_id} does not open with {seal.kek_id!r}") from None
        with self._lock:
            if len(self._unwrapped) >= 10_000:
                self._unwrapped.clear()
            self._unwrapped[seal.wrapped] = key
        return key

    def current_key(self, header: SealedHeader) -> bytes:
        """The data key a sealed object names, looked up in the key store.

        Raises:
            SubjectErased: The subject's key was destroyed (or replaced after an erasure).
        """
        record = self.record(header.fingerprint)
        if record is None or record.get("keyId") != header.key_id:
            raise SubjectErased(f"erased: the data subject {header.fingerprint[:24]}... was erased")
        seal = SubjectSeal(
            fingerprint=header.fingerprint, key_id=record["keyId"], kek_id=record["kekId"], wrapped=record["wrapped"]
        )
        return self.data_key(seal)

    def record(self, fingerprint: str) -> dict[str, Any] | None:
        """The subject's key record, or None when it has none (never had, or erased)."""
        stored = self.store.stored_or_none(key_record_key(fingerprint))
        if stored is None:
            return None
        found: dict[str, Any] = json.loads(stored)
        return found

    def destroy(self, fingerprint: str) -> bool:
        """Delete the subject's key record; True if it had one."""
        existed = self.record(fingerprint) is not None
        self.store.s3.delete_object(Bucket=self.store.bucket, Key=key_record_key(fingerprint))
        with self._lock:
            self._unwrapped.clear()
        return existed

    def _create(self, fingerprint: str) -> dict[str, Any]:
        if self._active is None:
            raise SubjectKeysMissing(_MISSING)
        key_id = uuid.uuid4().hex
        nonce = os.urandom(NONCE_BYTES)
        data_key = AESGCM.generate_key(bit_length=256)
        wrapped = nonce + self._keks[self._active].encrypt(nonce, data_key, _wrap_context(fingerprint, key_id))
        record = {
            "subject": fingerprint,
            "keyId": key_id,
            "kekId": self._active,
            "wrapped": base64.b64encode(wrapped).decode(),
            "createdAt": datetime.now(UTC).isoformat(),
        }
        if self.store.put_if_absent(key_record_key(fingerprint), json.dumps(record).encode()):
            with self._lock:
                self._unwrapped[record["wrapped"]] = data_key  # made here: no need to unwrap it
            return record
        found = self.record(fingerprint)  # another starter made it first: use theirs
        if found is None:
            raise SubjectErased(f"subject {fingerprint[:24]}...: its key vanished while it was made")
        return found


def _wrap_context(fingerprint: str, key_id: str) -> bytes:
    return f"{fingerprint}/{key_id}".encode()


_MISSING = (
    "subject: runs with a data subject need a key-encryption key; set DSMO_SUBJECT_KEYS or "
    "DSMO_SUBJECT_KEYS_FILE (id:base64 entries, as DSMO_CODEC_KEYS)"
)
