"""Pure parts of the data lifecycle: periods, retention policies, due keys, sealing, fingerprints."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.exceptions import InvalidTag
from pydantic import ValidationError

from dsmo.activities.retention_markers import ENDED_PREFIX, due_key
from dsmo.activities.sealing import MAGIC, SealedHeader, seal, sealed_header, unseal
from dsmo.workflows.common.durations import format_duration, format_long_duration, parse_duration
from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.definition.model import parse_definition
from dsmo.workflows.definition.retention import Retention
from dsmo.workflows.definition.sensitive import fingerprint
from dsmo.workflows.definition.subjects import SubjectMissing, render_subject


def test_years_are_taken_only_where_a_period_may_be_that_long() -> None:
    assert parse_duration("7y", years=True) == timedelta(days=7 * 365)
    assert format_long_duration(timedelta(days=730)) == "2y" and format_long_duration(timedelta(days=180)) == "180d"
    assert format_duration(timedelta(days=365)) == "365d"  # a stage timeout keeps its canonical form
    with pytest.raises(ValueError, match="invalid duration '100y'"):
        parse_duration("100y")  # a stage timeout of a century is a typo


def test_a_retention_policy_is_checked_and_merged_with_the_defaults() -> None:
    assert Retention.model_validate({"ended": "180d", "trail": "7y"}).trail == timedelta(days=2555)
    with pytest.raises(ValidationError, match="ended: at least 1h"):
        Retention.model_validate({"ended": "30m"})
    with pytest.raises(ValidationError, match="trail: at least as long as ended"):
        Retention.model_validate({"ended": "30d", "trail": "7d"})
    defaults = Retention.model_validate({"ended": "180d"})
    merged = Retention.model_validate({"trail": "30d"}).merged(defaults)
    assert (merged.ended, merged.trail) == (timedelta(days=180), timedelta(days=180))  # never shorter
    assert Retention().merged(Retention()) == Retention()


def test_a_due_key_sorts_by_time_and_is_never_early() -> None:
    on_the_minute = datetime(2026, 11, 26, 12, 30, tzinfo=UTC)
    assert due_key(ENDED_PREFIX, on_the_minute, "r-1") == "retention/ended/20261126T1230/r-1.json"
    late = due_key(ENDED_PREFIX, on_the_minute + timedelta(seconds=1), "r-1")
    assert late == "retention/ended/20261126T1231/r-1.json"
    assert due_key(ENDED_PREFIX, on_the_minute, "z") < due_key(ENDED_PREFIX, on_the_minute + timedelta(days=1), "a")


def test_a_sealed_object_opens_only_with_its_key_at_its_place() -> None:
    key, other = os.urandom(32), os.urandom(32)
    header = SealedHeader("hmac-sha256:ab", "k1")
    sealed = seal(b'{"name": "Eva"}', key, header, "artifacts/v/r/input.json")
    assert sealed.startswith(MAGIC) and b"Eva" not in sealed
    assert sealed_header(sealed) == header and sealed_header(b'{"plain": 1}') is None
    assert unseal(sealed, key, "artifacts/v/r/input.json") == b'{"name": "Eva"}'
    with pytest.raises(InvalidTag):
        unseal(sealed, other, "artifacts/v/r/input.json")
    with pytest.raises(InvalidTag):
        unseal(sealed, key, "artifacts/v/other/input.json")  # copied elsewhere, it does not open


def test_keyed_fingerprints_cannot_be_found_by_hashing_candidates() -> None:
    plain, keyed = fingerprint("1990-01-01"), fingerprint("1990-01-01", b"k" * 32)
    assert plain.startswith("sha256:") and keyed.startswith("hmac-sha256:") and plain[7:] != keyed[12:]
    assert keyed == fingerprint("1990-01-01", b"k" * 32) != fingerprint("1990-01-01", b"j" * 32)


def test_a_subject_is_rendered_from_the_input_or_refused_naming_it() -> None:
    assert render_subject("{{applicant.id}}", {"applicant": {"id": "A-17"}}) == "A-17"
    with pytest.raises(SubjectMissing, match=r"^subject: .*applicant\.id"):
        render_subject("{{applicant.id}}", {"applicant": {}})
    with pytest.raises(SubjectMissing, match="quote"):
        render_subject("{{applicant.id}}", {"applicant": {"id": "A' OR 1=1"}})


def test_a_debounced_definition_cannot_name_a_subject() -> None:
    body = {
        "agent": "batched",
        "inputs": ["person"],
        "subject": "{{person.id}}",
        "debounce": {"key": "{{person.id}}", "period": "5s"},
        "start": "m",
        "nodes": {"m": {"actionType": "send_message", "parameters": {"to": "a@example.com", "message": "hi"}}},
    }
    with pytest.raises(DefinitionError, match="subject: a debounced definition cannot name a data subject"):
        parse_definition(body)
