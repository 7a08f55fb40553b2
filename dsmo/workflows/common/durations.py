"""Human durations (``250ms``, ``1.5s``, ``30s``, ``15m``, ``24h``, ``7d``, ``1h30m``, ``7y``) as timedeltas.

A year (``y``) is 365 days; only periods that may be that long take it (`LongDuration`:
retention), so a stage timeout of ``100y`` is still refused as the typo it is.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
YEAR_SECONDS = 365 * 86400
_PATTERN = re.compile(r"(?:(\d+)y)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?")


def parse_duration(value: Any, *, years: bool = False) -> timedelta:
    """Parse ``value`` (a duration string, seconds as a number, or a timedelta); ``y`` only with ``years``."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}: use e.g. 30s, 15m, 24h, 7d")
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        match = _PATTERN.fullmatch(text)
        if not text or match is None or not any(match.groups()):
            raise ValueError(f"invalid duration {value!r}: use e.g. 30s, 15m, 24h, 7d or 1h30m")
        in_years, *whole, milliseconds = match.groups()
        if in_years and not years:
            raise ValueError(f"invalid duration {value!r}: use e.g. 30s, 15m, 24h, 7d or 1h30m")
        seconds = sum(float(part) * factor for part, factor in zip(whole, _UNITS.values(), strict=True) if part)
        seconds += int(in_years) * YEAR_SECONDS if in_years else 0
        seconds += int(milliseconds) / 1000 if milliseconds else 0.0
    else:
        raise ValueError(f"invalid duration {value!r}: use e.g. 30s, 15m, 24h, 7d")
    if seconds <= 0:
        raise ValueError(f"invalid duration {value!r}: must be greater than zero")
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """A compact exact form as people write it: 24h -> ``"24h"``, 7 days -> ``"7d"``, ``"1h30m"``."""
    remaining = int(value.total_seconds())
    if remaining != value.total_seconds():
        if value.total_seconds() < 1:
            return f"{round(value.total_seconds() * 1000)}ms"
        return f"{value.total_seconds():g}s"
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


def _parse_long(value: Any) -> timedelta:
    return parse_duration(value, years=True)


def format_long_duration(value: timedelta) -> str:
    """`format_duration`, in whole years where it is some (``7y``); only `LongDuration` writes it."""
    seconds = value.total_seconds()
    if seconds and seconds % YEAR_SECONDS == 0:
        return f"{int(seconds) // YEAR_SECONDS}y"
    return format_duration(value)


# A period that may run to years (``7y``): retention. Other durations never read or write years,
# so a definition's canonical form (its workflow_version) is what it was.
LongDuration = Annotated[
    timedelta,
    BeforeValidator(_parse_long),
    PlainSerializer(format_long_duration, return_type=str, when_used="json"),
]
