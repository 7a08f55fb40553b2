"""Sessions ended by "Sign out", kept beside the key file until they would have expired.

A session cookie is signed, so the console keeps no table of sessions; a copy of the cookie made
before "Sign out" would otherwise work until it expires. Signing out writes the session's random
id and its expiry to ``console-signed-out`` (mode 0600, beside the key file, like the signing
secret), and every request checks it, so every `dsmo serve` sharing the key file refuses the
session at once. Writers take a lock; the file is rewritten whole without the entries that have
expired, so it holds at most the sign-outs of the last `SESSION_SECONDS`.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

SIGNED_OUT_FILE = "console-signed-out"


class SignedOut:
    """The ids of sessions signed out and not yet expired, shared through a file.

    Args:
        beside: The key file; the list lives next to it.
        now: The clock, in seconds (tests pass their own).
    """

    def __init__(self, beside: Path, now: Callable[[], float] | None = None) -> None:
        self.path = beside.with_name(SIGNED_OUT_FILE)
        self._now = time.time if now is None else now
        self._seen: tuple[int, int] | None = None
        self._ids: dict[str, int] = {}

    def __contains__(self, session_id: object) -> bool:
        """Whether the session was signed out (read again whenever the file changed)."""
        return isinstance(session_id, str) and session_id in self._current()

    def add(self, session_id: str, expires: int) -> None:
        """End the session ``session_id`` (valid until ``expires``) for every server."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(self.path.with_name(f"{SIGNED_OUT_FILE}.lock"), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            now = self._now()
            kept = {sid: until for sid, until in self._read().items() if until > now}
            kept[session_id] = expires
            temporary = self.path.with_name(f"{SIGNED_OUT_FILE}.tmp")
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as file:
                file.writelines(f"{sid} {until}\n" for sid, until in kept.items())
            temporary.replace(self.path)
        finally:
            os.close(lock)  # closing releases the lock

    def _current(self) -> dict[str, int]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._seen, self._ids = None, {}
            return self._ids
        seen = (stat.st_mtime_ns, stat.st_ino)
        if seen != self._seen:
            self._ids, self._seen = self._read(), seen
        return self._ids

    def _read(self) -> dict[str, int]:
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return {}
        found = {}
        for line in lines:
            sid, _, until = line.partition(" ")
            if sid and until.isdigit():
                found[sid] = int(until)
        return found
