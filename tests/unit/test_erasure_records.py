"""Which erasure record `dsmo audit verify` cites for an erased run: the erasure that erased it,
not the subject's latest (a later erasure of runs started since)."""

from __future__ import annotations

from dsmo.client.trail_store import erasure_of

FIRST = {"seq": 1, "runs": ["loan-1"], "keysDestroyed": ["k-1"]}
SECOND = {"seq": 3, "runs": ["loan-3"], "keysDestroyed": ["k-2"]}
REPEATED = {"seq": 2, "runs": ["loan-1"], "keysDestroyed": []}  # run again: the key was gone already


def test_the_record_that_destroyed_the_run_s_key_is_cited() -> None:
    assert erasure_of([FIRST, REPEATED, SECOND], "loan-1", "k-1") is FIRST
    assert erasure_of([FIRST, REPEATED, SECOND], "loan-3", "k-2") is SECOND


def test_without_its_key_the_first_record_listing_the_run_is_cited() -> None:
    assert erasure_of([REPEATED, SECOND], "loan-1", "k-1") is REPEATED
    assert erasure_of([SECOND, FIRST], "loan-1", None) is FIRST


def test_a_run_no_record_names_gets_the_subject_s_first_and_none_without_records() -> None:
    assert erasure_of([FIRST, SECOND], "loan-9", None) is FIRST
    assert erasure_of([], "loan-1", "k-1") is None
