"""Human durations (``30s``, ``15m``, ``24h``, ``7d``, ``1h30m``) as pydantic-friendly timedeltas."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PATTERN = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(value: Any) -> timedelta:
    """Parse ``value`` (a duration string, seconds as a number, or a timedelta)."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}: use e.g. 30s, 15m, 24h, 7d")
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        match = _PATTERN.match(text)
        if not text or match is None or not any(match.groups()):
            raise ValueError(f"invalid duration {value!r}: use e.g. 30s, 15m, 24h, 7d or 1h30m")
        seconds = float(
            sum(int(part) * factor for part, factor in zip(match.groups(), _UNITS.values(), strict=True) if part)
        )
    else:
        raise ValueError(f"invalid duration {value!r}: use e.g. 30s, 15m, 24h, 7d")
    if seconds <= 0:
        raise ValueError(f"invalid duration {value!r}: must be greater than zero")
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """A compact exact form as people write it: 24h -> ``"24h"``, 7 days -> ``"7d"``, ``"1h30m"``."""
    remaining = int(value.total_seconds())
    if remaining != value.total_seconds():
        return f"{value.total_seconds()}s"
    # Whole days from two days up read as days (7d, 30d); a single day reads as 24h, as in the seed.
    units = (
        _UNITS if remaining % 86400 == 0 and remaining >= 2 * 86400 else {k: v for k, v in _UNITS.items() if k != "d"}
    )
    parts = []
    for unit, factor in units.items():
        amount, remaining = divmod(remaining, factor)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts) or "0s"


Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
]
