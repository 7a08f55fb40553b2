"""The console's sessions and CSRF tokens: signed values, no server-side store.

A person signs in with an API key; the console answers with a session cookie that names the key,
a fingerprint of its hash and a random session id, signed with the console's secret. Every
request re-reads the key file, so a revoked or replaced key ends its sessions at once; "Sign
out" lists the session id as ended (see `signed_out`), so a copy of the cookie is refused too.
The secret lives beside the key file (``console-secret``, mode 0600), created on first use, so
every `dsmo serve` sharing the key file accepts the same sessions and a restart signs nobody out.

CSRF tokens are bound to the session (or, on the sign-in form, to a random pre-session cookie):
``nonce.signature`` where the signature covers the nonce and the binding, so a token from one
session is useless in another and a forged cookie cannot match it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SESSION_COOKIE = "dsmo_session"
PRESESSION_COOKIE = "dsmo_presession"
SESSION_SECONDS = 12 * 3600
SECRET_FILE = "console-secret"


def load_secret(beside: Path) -> bytes:
    """The console's signing secret, kept in ``console-secret`` next to ``beside`` (created once)."""
    path = beside.with_name(SECRET_FILE)
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_bytes(32)
    # O_EXCL: two servers starting at once keep one secret; the loser reads the winner's.
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return bytes.fromhex(path.read_text().strip())
    with os.fdopen(descriptor, "w") as file:
        file.write(secret.hex())
    return secret


@dataclass(frozen=True)
class Session:
    """Who is signed in: the key's name and a fingerprint of its stored hash, until ``expires``.

    ``session_id`` is random, one per sign-in: "Sign out" ends that session and no other.
    """

    key_name: str
    key_fingerprint: str
    expires: int
    session_id: str

    @property
    def binding(self) -> str:
        """What this session's CSRF tokens are bound to."""
        return f"session:{self.key_name}:{self.key_fingerprint}:{self.expires}:{self.session_id}"


def key_fingerprint(key_hash: str) -> str:
    """A short, non-reversible mark of a stored key hash: a replaced key gets a new one."""
    return hashlib.sha256(f"dsmo-console:{key_hash}".encode()).hexdigest()[:16]


class Signer:
    """Signs and checks session cookies and CSRF tokens with one secret.

    Args:
        secret: The signing key (see `load_secret`).
        now: The clock, in seconds (tests pass their own).
    """

    def __init__(self, secret: bytes, now: Callable[[], float] | None = None) -> None:
        self._secret = secret
        self._now = time.time if now is None else now

    def _mac(self, purpose: str, value: str) -> str:
        digest = hmac.new(self._secret, f"{purpose}\n{value}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def session_cookie(self, key_name: str, key_hash: str) -> str:
        """A signed session for the key, valid for `SESSION_SECONDS`."""
        payload = {
            "k": key_name,
            "f": key_fingerprint(key_hash),
            "e": int(self._now()) + SESSION_SECONDS,
            "s": secrets.token_urlsafe(16),
        }
        body = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")
        return f"{body}.{self._mac('session', body)}"

    def session(self, cookie: str | None) -> Session | None:
        """The session a cookie carries, or None when it is missing, forged, malformed or expired."""
        if not cookie or cookie.count(".") != 1:
            return None
        body, mac = cookie.split(".")
        if not hmac.compare_digest(mac, self._mac("session", body)):
            return None
        try:
            payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            # A cookie from before sessions had ids ("s") is no session: its holder signs in again.
            session = Session(str(payload["k"]), str(payload["f"]), int(payload["e"]), str(payload["s"]))
        except (ValueError, KeyError, TypeError):
            return None
        return session if session.expires > self._now() else None

    def csrf_token(self, binding: str) -> str:
        """A fresh token for one form, bound to a session (or a pre-session cookie)."""
        nonce = secrets.token_urlsafe(16)
        return f"{nonce}.{self._mac('csrf', f'{binding}:{nonce}')}"

    def csrf_valid(self, token: str | None, binding: str) -> bool:
        """Whether ``token`` was issued by this console for ``binding``."""
        if not token or token.count(".") != 1:
            return False
        nonce, mac = token.split(".")
        return hmac.compare_digest(mac, self._mac("csrf", f"{binding}:{nonce}"))

    def sign(self, purpose: str, value: str) -> str:
        """A signature of ``value`` for ``purpose`` (an upload's return address, for instance)."""
        return self._mac(purpose, value)

    def verify(self, purpose: str, value: str, signature: str) -> bool:
        """Whether ``signature`` is `sign(purpose, value)`."""
        return hmac.compare_digest(signature, self._mac(purpose, value))
