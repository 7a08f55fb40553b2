"""API keys for the ingress: one per calling system, hashed at rest, scoped.

Scopes: `start`, `read`, `cancel`, `operate` (move runs to another version), and `events:<TYPE>`
(or `events:*`) for the resume events a system may send. The file holds only SHA-256 hashes of
the keys (random 256-bit tokens, so a plain hash is enough); the key itself is shown once, when
it is created.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.events.resume_events import EVENT_KINDS

KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
SCOPES = ("start", "read", "cancel", "operate", "events:*", *(f"events:{kind}" for kind in EVENT_KINDS))
# Decisions a person takes (a tool call, a spent budget): who decided is recorded, and their
# scopes are never granted by `events:*`.
DECISION_EVENTS = ("TOOL_DECIDED", "BUDGET_DECIDED")
DECISION_SCOPES = frozenset(f"events:{event}" for event in DECISION_EVENTS)


class ApiKeyError(DsmoError):
    code = "api_key_error"


@dataclass(frozen=True)
class ApiKey:
    name: str
    key_hash: str
    prefix: str
    scopes: list[str] = field(default_factory=list)

    def allows(self, scope: str) -> bool:
        if scope in self.scopes:
            return True
        # `events:*` is every event a system sends; deciding a tool call (a refund, a deletion) is
        # a person's judgement and is given by name, so a key made for a webhook cannot approve.
        return scope.startswith("events:") and scope not in DECISION_SCOPES and "events:*" in self.scopes


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyStore:
    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> list[ApiKey]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as err:
            raise ApiKeyError(f"DSMO_API_KEYS_FILE: cannot read {self.path}: {err}") from None
        return [ApiKey(**entry) for entry in data.get("keys", [])]

    def add(self, name: str, scopes: list[str]) -> str:
        """Create a key for ``name``; returns the key (shown once, never stored)."""
        if not KEY_NAME.fullmatch(name):
            # The name is who a key's requests are recorded as (who cancelled, who replied).
            raise ApiKeyError(
                f"NAME: {name!r} is not a key name (1-64 letters, digits and . _ - @, starting with a letter or digit)"
            )
        unknown = [scope for scope in scopes if scope not in SCOPES]
        if unknown:
            raise ApiKeyError(f"--scope: {unknown[0]!r} is not a scope ({', '.join(SCOPES)})")
        keys = [key for key in self.load() if key.name != name]
        plain = f"dsmo_{secrets.token_urlsafe(32)}"
        keys.append(ApiKey(name=name, key_hash=_digest(plain), prefix=plain[:9], scopes=sorted(set(scopes))))
        self._save(keys)
        return plain

    def revoke(self, name: str) -> bool:
        keys = self.load()
        kept = [key for key in keys if key.name != name]
        self._save(kept)
        return len(kept) != len(keys)

    def verify(self, presented: str) -> ApiKey | None:
        digest = _digest(presented)
        for key in self.load():
            if hmac.compare_digest(key.key_hash, digest):
                return key
        return None

    def named(self, name: str) -> ApiKey | None:
        """The key called ``name``, if it still exists."""
        return next((key for key in self.load() if key.name == name), None)

    def _save(self, keys: list[ApiKey]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"keys": [asdict(key) for key in keys]}, indent=2))
        os.chmod(temporary, 0o600)
        temporary.replace(self.path)


def bearer_credential(authorization: str | None) -> str:
    """The key an ``Authorization`` header carries: after its ``Bearer`` scheme, named in any case
    (HTTP's schemes are case-insensitive), or the whole header when it names none."""
    scheme, _, rest = (authorization or "").strip().partition(" ")
    return rest.strip() if scheme.lower() == "bearer" else (authorization or "").strip()
