"""The event ids a run has taken: a bounded window that crosses continue-as-new.

A run recognises a repeated `event_id` as a duplicate for as long as the id is among the last
`SEEN_IDS_WINDOW` distinct ids the run took, whatever generation took it. Each id is kept as a
fixed-size fingerprint (96 bits of its SHA-256), so the window's size in the continue-as-new
input is the same whatever the ids look like: at most `SEEN_IDS_WINDOW * FINGERPRINT_CHARS`
characters (160 KB), far under Temporal's 2 MB limit.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable

# How many distinct event ids a run remembers. An id older than this many later ids is
# forgotten: sent again, it is judged as a new event.
SEEN_IDS_WINDOW = 10_000
FINGERPRINT_BYTES = 12  # 96 bits: a chance collision among 10,000 ids is about 1 in 10^20
FINGERPRINT_CHARS = 16  # base64 of 12 bytes, no padding


def fingerprint(event_id: str) -> str:
    """The fixed-size stand-in for ``event_id`` that the window keeps."""
    digest = hashlib.sha256(event_id.encode("utf-8", "surrogatepass")).digest()[:FINGERPRINT_BYTES]
    return base64.urlsafe_b64encode(digest).decode("ascii")


class SeenIds:
    """The last ``window`` distinct event ids taken, oldest first, as fingerprints."""

    def __init__(self, window: int = SEEN_IDS_WINDOW) -> None:
        self.window = window
        self._prints: dict[str, None] = {}  # insertion-ordered: the oldest is evicted first

    def __contains__(self, event_id: object) -> bool:
        return isinstance(event_id, str) and fingerprint(event_id) in self._prints

    def __len__(self) -> int:
        return len(self._prints)

    def add(self, event_id: str) -> None:
        """Remember ``event_id`` (again: it becomes the newest)."""
        self._remember(fingerprint(event_id))

    def _remember(self, print_: str) -> None:
        self._prints.pop(print_, None)
        self._prints[print_] = None
        while len(self._prints) > self.window:
            del self._prints[next(iter(self._prints))]

    def packed(self) -> str:
        """The window as one string (fingerprints oldest first), for the continue-as-new input."""
        return "".join(self._prints)

    @classmethod
    def restored(cls, packed: str = "", legacy_ids: Iterable[str] = (), window: int = SEEN_IDS_WINDOW) -> SeenIds:
        """The window a checkpoint carried: ``packed`` fingerprints, or full ids from before the window."""
        seen = cls(window)
        for start in range(0, len(packed) - FINGERPRINT_CHARS + 1, FINGERPRINT_CHARS):
            seen._remember(packed[start : start + FINGERPRINT_CHARS])
        for event_id in legacy_ids:
            seen.add(event_id)
        return seen
