from __future__ import annotations

from datetime import timedelta

import pytest

from dsmo.workflows.common.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("15m", timedelta(minutes=15)),
        ("24h", timedelta(hours=24)),
        ("7d", timedelta(days=7)),
        ("1h30m", timedelta(minutes=90)),
        (" 2D ", timedelta(days=2)),
        (90, timedelta(seconds=90)),
        (1.5, timedelta(seconds=1.5)),
        ("250ms", timedelta(milliseconds=250)),
        ("1.5s", timedelta(seconds=1.5)),
    ],
)
def test_parse(text: object, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("bad", ["", "abc", "24", "1x", "h", "-5m", 0, -1, True, None, [1]])
def test_parse_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(bad)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(hours=24), "24h"),
        (timedelta(hours=48), "2d"),
        (timedelta(days=30), "30d"),
        (timedelta(minutes=90), "1h30m"),
        (timedelta(hours=36), "36h"),
        (timedelta(seconds=1), "1s"),
        (timedelta(milliseconds=200), "200ms"),
        (timedelta(seconds=2.5), "2.5s"),
    ],
)
def test_format_round_trips(value: timedelta, text: str) -> None:
    assert format_duration(value) == text
    assert parse_duration(text) == value
