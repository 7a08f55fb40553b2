"""Sealed artifacts: a stored object encrypted with its data subject's key, and saying so.

A sealed object starts with a line that names the subject (its fingerprint) and the key, then
holds the nonce and the AES-GCM ciphertext. The object's key in the bucket is the ciphertext's
associated data: a sealed object copied to another key does not open there. A reader that finds
no key for the subject (it was erased) cannot open it; nothing else is needed to erase it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MAGIC = b"dsmo-sealed/1 "
NONCE_BYTES = 12


@dataclass(frozen=True)
class SealedHeader:
    """Whose key opens a sealed object: the subject's fingerprint and which of its keys."""

    fingerprint: str
    key_id: str


def seal(body: bytes, data_key: bytes, header: SealedHeader, object_key: str) -> bytes:
    """``body`` encrypted for ``object_key`` with ``data_key``, behind its header line."""
    nonce = os.urandom(NONCE_BYTES)
    line = json.dumps({"subject": header.fingerprint, "keyId": header.key_id}, separators=(",", ":")).encode()
    return MAGIC + line + b"\n" + nonce + AESGCM(data_key).encrypt(nonce, body, object_key.encode())


def sealed_header(stored: bytes) -> SealedHeader | None:
    """The header of a sealed object, or None for an object stored in the clear."""
    if not stored.startswith(MAGIC):
        return None
    line = stored[len(MAGIC) : stored.index(b"\n")]
    fields = json.loads(line)
    return SealedHeader(str(fields["subject"]), str(fields["keyId"]))


def unseal(stored: bytes, data_key: bytes, object_key: str) -> bytes:
    """The plaintext of a sealed object stored at ``object_key``.

    Raises:
        cryptography.exceptions.InvalidTag: The key is not this object's, or the object was
            changed or moved.
    """
    payload = stored[stored.index(b"\n") + 1 :]
    return AESGCM(data_key).decrypt(payload[:NONCE_BYTES], payload[NONCE_BYTES:], object_key.encode())
