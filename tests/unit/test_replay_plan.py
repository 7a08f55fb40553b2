"""A replay's cursor in the original's record: by node (the same version), or by wait kind (what-if)."""

from __future__ import annotations

from dsmo.workflows.contracts.replay_plan import RecordedResume, next_of_kind, next_recorded

RECORD = [
    RecordedResume(node="ask", event_type="MESSAGE_RECEIVED", kind="response"),
    RecordedResume(node="docs", event_type="DOCUMENT_UPLOADED", kind="document"),
    RecordedResume(node="ask", event_type="TIMEOUT", kind="response"),
]


def test_by_node_the_next_record_at_that_node_is_taken_and_others_are_passed_over() -> None:
    assert next_recorded(RECORD, 0, "docs") == (RECORD[1], 2)
    assert next_recorded(RECORD, 2, "docs") == (None, 3)


def test_by_kind_a_renamed_wait_takes_the_next_record_of_its_kind() -> None:
    found, position = next_of_kind(RECORD, 0, "response")
    assert (found, position) == (RECORD[0], 1)
    assert next_of_kind(RECORD, position, "response") == (RECORD[2], 3)  # a timeout of that wait, in order
    assert next_of_kind(RECORD, 0, "signature") == (None, 3)  # never waited for: not invented
