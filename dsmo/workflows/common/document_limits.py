"""Size and depth limits on the JSON documents people and systems send: definitions, run inputs
and event data. Checked before anything is validated further or written, without recursion (a
document nested 900 deep must not exhaust the interpreter's stack), and counting shared values
each time they appear (a YAML alias expands where it is used). Inputs and event data are also
held to JSON's numbers: Python's JSON reads `NaN`, `Infinity` and `1e400` (as infinity), which no
other JSON reader takes back, and an integer past 4,000 digits cannot even be printed again."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsmo.workflows.common.errors import DsmoError


class DocumentRefused(DsmoError):
    """A document its limits refuse; the message names the place and the reason."""

    code = "invalid_document"


class DocumentTooLarge(DocumentRefused):
    """A document deeper, larger or with more values than its limits."""

    code = "document_too_large"


class NotJsonNumber(DocumentRefused):
    """A number JSON cannot hold: NaN, an infinity, or an integer too long to print."""

    code = "invalid_json"


@dataclass(frozen=True)
class DocumentLimits:
    """How deep, how many values and how many characters of strings and keys, in all; whether
    numbers must be ones JSON can hold (finite, integers up to ``MAX_INTEGER_DIGITS``)."""

    depth: int = 32
    values: int = 100_000
    chars: int = 2_000_000
    json_numbers: bool = False


MAX_INTEGER_DIGITS = 4_000
# Definitions published before numbers were checked must still load in the runs that carry them.
DEFINITION_LIMITS = DocumentLimits()
INPUT_LIMITS = DocumentLimits(depth=32, values=100_000, chars=1_000_000, json_numbers=True)
# An event's bytes are capped by dsmo.workflows.events.resume_events.MAX_EVENT_BYTES; these bound its shape.
EVENT_LIMITS = DocumentLimits(depth=32, values=10_000, chars=1_000_000, json_numbers=True)
# 4,000 decimal digits need at most this many bits (log2(10) = 3.3219...).
_MAX_INTEGER_BITS = math.ceil(MAX_INTEGER_DIGITS * 3.3220)


def check_document(value: Any, *, field: str, limits: DocumentLimits) -> None:
    """Raise DocumentRefused naming the first place ``value`` goes past ``limits``.

    Raises:
        DocumentTooLarge: Too deep, too many values or too much text.
        NotJsonNumber: With ``limits.json_numbers``, a number JSON cannot hold.
    """
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
        elif limits.json_numbers and isinstance(current, float | int) and not isinstance(current, bool):
            _check_number(current, field, path)
        elif isinstance(current, Mapping):
            for key, item in current.items():
                chars += len(str(key))
                pending.append((item, depth + 1, (*path, str(key))))
        elif isinstance(current, list | tuple):
            pending.extend((item, depth + 1, (*path, f"[{index}]")) for index, item in enumerate(current))
        if chars > limits.chars:
            raise DocumentTooLarge(f"{field}: more than {limits.chars:,} characters of text")


def _check_number(number: float, field: str, path: tuple[str, ...]) -> None:
    if isinstance(number, float) and not math.isfinite(number):
        shown = "NaN" if math.isnan(number) else "an infinity (or a number past 1e308)"
        raise NotJsonNumber(f"{_where(field, path)}: {shown} is not a JSON number")
    if isinstance(number, int) and number.bit_length() > _MAX_INTEGER_BITS:
        raise NotJsonNumber(f"{_where(field, path)}: an integer of more than {MAX_INTEGER_DIGITS:,} digits")


def _where(field: str, path: tuple[str, ...]) -> str:
    shown = path[:6]
    text = field + "".join(part if part.startswith("[") else f".{part}" for part in shown)
    return text + (".…" if len(path) > len(shown) else "")
