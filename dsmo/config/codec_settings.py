"""The deployment's keys: those that encrypt payloads on their way to Temporal (the payload
codec), and those that wrap data subjects' keys (the artifacts of runs with a subject)."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from dsmo.config.env_values import EnvReader
from dsmo.workflows.common.errors import DsmoError

# The subject key file the embedded stack writes when none is configured (`dsmo dev up`).
DEV_SUBJECT_KEYS_FILE = "subject-keys"


class CodecError(DsmoError):
    code = "codec_error"


def parse_keys(text: str, *, source: str) -> list[tuple[str, bytes]]:
    """``id:base64key`` entries, comma- or line-separated; each key 16, 24 or 32 bytes (AES).

    Raises:
        CodecError: An entry is malformed, naming ``source`` and the entry.
    """
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


def read_key_file(path: Path, *, source: str) -> list[tuple[str, bytes]]:
    """The keys in a file of ``id:base64key`` lines.

    Raises:
        CodecError: The file cannot be read, or an entry is malformed.
    """
    try:
        return parse_keys(path.read_text(), source=f"{source} ({path})")
    except OSError as err:
        raise CodecError(f"{source}: cannot read {path}: {err.strerror}") from None


@dataclass(frozen=True)
class CodecSettings:
    """Payload encryption keys and subject key-encryption keys, each given inline or in a file.

    The payload codec parses and checks its keys where it is built, so a process that reads only
    these two variables (the codec server) checks them the same way. No payload keys means
    payloads in clear; no subject keys means runs with a data subject cannot start (outside the
    embedded stack, which writes a key file of its own).

    Attributes:
        keys: Payload encryption keys, ``id:base64`` comma-separated [``DSMO_CODEC_KEYS``].
        keys_file: The same keys read from a file [``DSMO_CODEC_KEYS_FILE``].
        subject_keys: The keys that wrap data subjects' keys, ``id:base64``; the first wraps new
            ones, all unwrap, the last names subjects [``DSMO_SUBJECT_KEYS``].
        subject_keys_file: The same keys read from a file [``DSMO_SUBJECT_KEYS_FILE``].
    """

    # The variables this group reads, with their defaults.
    VARIABLES: ClassVar[dict[str, str]] = {
        "DSMO_CODEC_KEYS": "",
        "DSMO_CODEC_KEYS_FILE": "",
        "DSMO_SUBJECT_KEYS": "",
        "DSMO_SUBJECT_KEYS_FILE": "",
    }

    keys: str = ""
    keys_file: str = ""
    subject_keys: str = ""
    subject_keys_file: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CodecSettings:
        """Read this group's variables.

        Args:
            env: The environment; a variable unset or empty takes its default.

        Returns:
            The settings.
        """
        read = EnvReader(env, cls.VARIABLES)
        return cls(
            keys=read.text("DSMO_CODEC_KEYS"),
            keys_file=read.text("DSMO_CODEC_KEYS_FILE"),
            subject_keys=read.text("DSMO_SUBJECT_KEYS"),
            subject_keys_file=read.text("DSMO_SUBJECT_KEYS_FILE"),
        )

    def to_env(self) -> dict[str, str]:
        """The variables that make another process (or the codec alone) read these settings.

        Returns:
            The four variables with their values.
        """
        return {
            "DSMO_CODEC_KEYS": self.keys,
            "DSMO_CODEC_KEYS_FILE": self.keys_file,
            "DSMO_SUBJECT_KEYS": self.subject_keys,
            "DSMO_SUBJECT_KEYS_FILE": self.subject_keys_file,
        }

    def subject_keks(self, state_dir: Path) -> list[tuple[str, bytes]]:
        """The subject key-encryption keys: configured, or the embedded stack's file, or none.

        Args:
            state_dir: Where the embedded stack keeps its key file (used when none is configured).

        Returns:
            ``(id, key)`` pairs, the one that wraps new keys first; empty when there are none.

        Raises:
            CodecError: The keys are malformed or their file cannot be read.
        """
        if self.subject_keys:
            return parse_keys(self.subject_keys, source="DSMO_SUBJECT_KEYS")
        if self.subject_keys_file:
            return read_key_file(Path(self.subject_keys_file), source="DSMO_SUBJECT_KEYS_FILE")
        dev = state_dir / DEV_SUBJECT_KEYS_FILE
        return read_key_file(dev, source="the embedded stack's subject keys") if dev.exists() else []
