"""The embedded stack's own subject key-encryption key, so runs with a data subject work out of the box.

Written once to ``<state dir>/subject-keys`` (owner-only) when no subject keys are configured;
every process that shares the state folder (worker, CLI, console, tests) reads it from there. A
production deployment sets ``DSMO_SUBJECT_KEYS`` or ``DSMO_SUBJECT_KEYS_FILE`` from its secret store.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from dsmo.config.codec_settings import DEV_SUBJECT_KEYS_FILE
from dsmo.config.settings import Settings


def ensure_dev_subject_keys(settings: Settings) -> Path | None:
    """Write the stack's subject key file unless keys are configured or the file exists.

    Returns:
        The file written, or None when nothing was.
    """
    if settings.codec.subject_keys or settings.codec.subject_keys_file:
        return None
    path = settings.state_dir / DEV_SUBJECT_KEYS_FILE
    key = base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()
    try:
        # Created exclusively and owner-only: two stacks starting at once keep one key.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return None
    with os.fdopen(fd, "w") as out:
        out.write(f"dev1:{key}\n")
    return path
