"""Payload encryption: an AES-GCM codec so the Temporal server and Web UI never see plaintext.

Keys come from `DSMO_CODEC_KEYS` (`id1:base64key,id2:base64key`; the first encrypts, all
decrypt, so keys rotate by prepending a new one) or from the file named by
`DSMO_CODEC_KEYS_FILE` (one `id:base64key` per line). Each encrypted payload records its key id
in its metadata. Off unless keys are configured.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from dsmo.workflows.common.errors import DsmoError

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"


class CodecError(DsmoError):
    code = "codec_error"


def parse_keys(text: str, *, source: str) -> list[tuple[str, bytes]]:
    keys = []
    for item in [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]:
        key_id, sep, encoded = item.partition(":")
        if not sep or not key_id:
            raise CodecError(f"{source}: entries are id:base64key (got {item[:10]!r}...)")
        try:
            key = base64.b64decode(encoded, validate=True)
        except ValueError:
            raise CodecError(f"{source}: key {key_id!r} is not valid base64") from None
        if len(key) not in (16, 24, 32):
            raise CodecError(f"{source}: key {key_id!r} must be 16, 24 or 32 bytes (AES), not {len(key)}")
        keys.append((key_id, key))
    return keys


def keys_from_env(env: dict[str, str] | None = None) -> list[tuple[str, bytes]]:
    source = os.environ if env is None else env
    if source.get("DSMO_CODEC_KEYS"):
        return parse_keys(source["DSMO_CODEC_KEYS"], source="DSMO_CODEC_KEYS")
    if source.get("DSMO_CODEC_KEYS_FILE"):
        path = Path(source["DSMO_CODEC_KEYS_FILE"])
        try:
            return parse_keys(path.read_text(), source=f"DSMO_CODEC_KEYS_FILE ({path})")
        except OSError as err:
            raise CodecError(f"DSMO_CODEC_KEYS_FILE: cannot read {path}: {err.strerror}") from None
    return []


def new_key() -> str:
    """A fresh 256-bit key, base64, for `id:key` entries."""
    return base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()


class EncryptionCodec(PayloadCodec):
    def __init__(self, keys: Sequence[tuple[str, bytes]]) -> None:
        if not keys:
            raise CodecError("encryption needs at least one key")
        self.active_id, active = keys[0]
        self.active = AESGCM(active)
        self.ciphers = {key_id: AESGCM(key) for key_id, key in keys}

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._encrypt(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._decrypt(payload) for payload in payloads]

    def _encrypt(self, payload: Payload) -> Payload:
        nonce = os.urandom(12)
        sealed = self.active.encrypt(nonce, payload.SerializeToString(), None)
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID: self.active_id.encode()},
            data=nonce + sealed,
        )

    def _decrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload  # not ours (e.g. written before encryption was turned on)
        key_id = payload.metadata.get(KEY_ID, b"").decode()
        cipher = self.ciphers.get(key_id)
        if cipher is None:
            raise CodecError(f"payload encrypted with unknown key {key_id!r}; add it to DSMO_CODEC_KEYS")
        plain = cipher.decrypt(payload.data[:12], payload.data[12:], None)
        decoded = Payload()
        decoded.ParseFromString(plain)
        return decoded
