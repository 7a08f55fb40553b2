"""A trail read as the run now stands: the parts rewinds went back over are left out, and a
re-execution reuses each stage's output of the same visit; corrections are checked by name."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dsmo.client.record_lines import current_line, going_back_to, reused_outputs
from dsmo.workflows.contracts.run_records import AuditEvent
from dsmo.workflows.definition.corrections import correction_problem
from dsmo.workflows.definition.model import parse_definition

FLOW = parse_definition(
    {
        "agent": "lines",
        "inputs": ["email", "name"],
        "start": "read",
        "nodes": {
            "read": {"actionType": "run_agent", "agent": "reader", "next": "ask"},
            "ask": {
                "actionType": "wait_for_response",
                "parameters": {"timeout": "1h"},
                "transitions": [{"when": 'lastResponse == "again"', "to": "read"}, {"to": "bye"}],
            },
            "bye": {"actionType": "send_message", "parameters": {"message": "bye {{name}}", "to": "{{email}}"}},
        },
    }
)


def _trail(*entries: tuple[str, str | None, dict[str, Any]]) -> list[AuditEvent]:
    at = datetime(2026, 11, 26, tzinfo=UTC)
    events = []
    for seq, (kind, stage, extra) in enumerate(entries, start=1):
        fields = {"attempt": extra.pop("attempt", None), "artifact_uris": extra.pop("uris", [])}
        events.append(
            AuditEvent(seq=seq, type=kind, run_id="r", at=at, stage=stage, workflow_version="w", data=extra, **fields)
        )
    return events


def test_a_trail_never_rewound_is_its_own_current_line() -> None:
    trail = _trail(("RUN_CREATED", None, {}), ("RUN_WAITING", "ask", {}))
    assert current_line(trail) == trail


def test_the_events_a_rewind_went_back_over_are_left_out_and_the_rest_kept_in_order() -> None:
    trail = _trail(
        ("RUN_CREATED", None, {}),  # 1
        ("RUN_WAITING", "ask", {}),  # 2: first entry of ask
        ("RUN_RESUMED", "ask", {}),  # 3
        ("RUN_WAITING", "bye", {}),  # 4
        ("RUN_REWOUND", "ask", {"cutFrom": 2}),  # 5: back to ask
        ("RUN_CONTINUED", "read", {}),  # 6
        ("RUN_WAITING", "ask", {}),  # 7: ask entered again
        ("RUN_RESUMED", "ask", {}),  # 8
        ("RUN_REWOUND", "ask", {"cutFrom": 7}),  # 9: back to ask again
    )
    assert [event.seq for event in current_line(trail)] == [1, 5, 6, 9]


def test_reused_outputs_are_keyed_by_visit_and_stop_where_the_node_was_first_entered() -> None:
    trail = _trail(
        ("STAGE_ENQUEUED", "read", {"attempt": 1}),
        ("STAGE_ENQUEUED", "read", {"attempt": 2}),  # a retry of the same visit
        ("STAGE_SUCCEEDED", "read", {"uris": ["s3://b/read-1"]}),
        ("RUN_WAITING", "ask", {}),
        ("STAGE_ENQUEUED", "read", {"attempt": 1}),  # the loop came back: a second visit
        ("STAGE_SUCCEEDED", "read", {"uris": ["s3://b/read-2"]}),
        ("RUN_WAITING", "bye", {}),
        ("STAGE_ENQUEUED", "read", {"attempt": 1}),
        ("STAGE_SUCCEEDED", "read", {"uris": ["s3://b/read-3"]}),
    )
    assert reused_outputs(FLOW, trail, "bye") == {"read": "s3://b/read-1", "read.v2": "s3://b/read-2"}
    assert reused_outputs(FLOW, trail, "ask") == {"read": "s3://b/read-1"}


def test_a_correction_must_be_an_input_or_read_from_the_node_on() -> None:
    assert correction_problem(FLOW, "ask", "email") is None  # an input
    assert correction_problem(FLOW, "ask", "lastResponse") is None  # read by a condition at `ask`
    assert correction_problem(FLOW, "bye", "lastResponse") == (
        "no node from 'bye' on reads 'lastResponse', and it is not an input of lines"
    )
    assert "holds the stages' outputs" in (correction_problem(FLOW, "ask", "stages") or "")
    assert "is not a variable name" in (correction_problem(FLOW, "ask", "1st") or "")


def test_a_rewind_is_under_way_until_the_run_records_anything_but_its_undo() -> None:
    undoing = _trail(
        ("RUN_CREATED", None, {}),  # 1
        ("STAGE_ENQUEUED", "read", {"attempt": 1}),  # 2
        ("RUN_WAITING", "ask", {}),  # 3
        ("RUN_REWOUND", "read", {"toNode": "read", "cutFrom": 2}),  # 4
        ("COMPENSATION_STARTED", "charge", {}),  # 5
        ("EVENT_BUFFERED", "ask", {}),  # 6: kept for the wait ahead
    )
    assert going_back_to(current_line(undoing)) == "read"
    assert going_back_to(current_line([*undoing[:5], *_trail(("RUN_CONTINUED", None, {}))])) == "read"
    back = [*undoing, *_trail(("STAGE_ENQUEUED", "read", {"attempt": 1}))]
    assert going_back_to(current_line(back)) is None
    assert going_back_to(current_line(undoing[:3])) is None  # never rewound
