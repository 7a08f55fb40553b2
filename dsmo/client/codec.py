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

from dsmo.config.codec_settings import CodecError, parse_keys, read_key_file

__all__ = ["CodecError", "EncryptionCodec", "keys_from_env", "new_key", "parse_keys"]

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"


def keys_from_env(env: dict[str, str] | None = None) -> list[tuple[str, bytes]]:
    source = os.environ if env is None else env
    if source.get("DSMO_CODEC_KEYS"):
        return parse_keys(source["DSMO_CODEC_KEYS"], source="DSMO_CODEC_KEYS")
    if source.get("DSMO_CODEC_KEYS_FILE"):
        return read_key_file(Path(source["DSMO_CODEC_KEYS_FILE"]), source="DSMO_CODEC_KEYS_FILE")
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
