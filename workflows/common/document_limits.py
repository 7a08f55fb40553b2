"""Size and depth limits on the JSON documents people and systems send: definitions, run inputs
and event data. Checked before anything is validated further or written, without recursion (a
document nested 900 deep must not exhaust the interpreter's stack), and counting shared values
each time they appear (a YAML alias expands where it is used)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsmo.workflows.common.errors import DsmoError


class DocumentTooLarge(DsmoError):
    """A document deeper, larger or with more values than its limits."""

    code = "document_too_large"


@dataclass(frozen=True)
class DocumentLimits:
    """How deep, how many values and how many characters of strings and keys, in all."""

    depth: int = 32
    values: int = 100_000
    chars: int = 2_000_000


DEFINITION_LIMITS = DocumentLimits()
INPUT_LIMITS = DocumentLimits(depth=32, values=100_000, chars=1_000_000)
# An event's bytes are capped by dsmo.workflows.events.resume_events.MAX_EVENT_BYTES; these bound its shape.
EVENT_LIMITS = DocumentLimits(depth=32, values=10_000, chars=1_000_000)


def check_document(value: Any, *, field: str, limits: DocumentLimits) -> None:
    """Raise DocumentTooLarge naming the first place ``value`` goes past ``limits``."""
    pending: list[tuple[Any, int, tuple[str, ...]]] = [(value, 1, ())]
    values = chars = 0
    while pending:
        current, depth, path = pending.pop()
        values += 1
        if values > limits.values:
            raise DocumentTooLarge(f"{field}: more than {limits.values:,} values")
        if depth > limits.depth:
            raise DocumentTooLarge(f"{_where(field, path)}: nested more than {limits.depth} levels deep")
        if isinstance(current, str):
            chars += len(current)
        elif isinstance(current, Mapping):
            for key, item in current.items():
                chars += len(str(key))
                pending.append((item, depth + 1, (*path, str(key))))
        elif isinstance(current, list | tuple):
            pending.extend((item, depth + 1, (*path, f"[{index}]")) for index, item in enumerate(current))
        if chars > limits.chars:
            raise DocumentTooLarge(f"{field}: more than {limits.chars:,} characters of text")


def _where(field: str, path: tuple[str, ...]) -> str:
    shown = path[:6]
    text = field + "".join(part if part.startswith("[") else f".{part}" for part in shown)
    return text + (".…" if len(path) > len(shown) else "")
