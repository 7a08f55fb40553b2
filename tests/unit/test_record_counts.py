"""Counts as people read them: `1 event`, not `1 events`; a debounced run's starts as a number."""

from __future__ import annotations

from dsmo.cli.recovery import counted
from dsmo.workflows.engine.beginning import _numbered


def test_a_count_takes_its_noun_in_the_right_number() -> None:
    assert [counted(n, "event") for n in (0, 1, 2)] == ["0 events", "1 event", "2 events"]
    assert counted(1, "file") == "1 file" and counted(1, "artifact") == "1 artifact"


def test_run_created_records_debounced_starts_as_a_number() -> None:
    assert _numbered({"debouncedStarts": "5", "debounceKey": "k"}) == {"debouncedStarts": 5, "debounceKey": "k"}
    # What a raw start put there that is not a count stays as it came (and never fails the run).
    for odd in ("five", "²", "9" * 40, ""):
        assert _numbered({"debouncedStarts": odd}) == {"debouncedStarts": odd}
    assert _numbered({"redriveOf": "r-1"}) == {"redriveOf": "r-1"}
