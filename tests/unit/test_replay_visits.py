"""Recording keyed by (node, visit, committed attempt): what a replay reuses, where it reads each
`llm` visit's model calls, and how a replay the record cannot answer is counted."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dsmo.client.batches import BatchReport, RunOutcome
from dsmo.client.record_lines import recorded_llm_visits, reused_outputs, stage_visits, visit_key
from dsmo.client.replay import record_problem
from dsmo.client.what_if import WhatIfReport, WhatIfRun, _node_of
from dsmo.workflows.contracts.replay_plan import RecordedVisit, ReplayPlan
from dsmo.workflows.contracts.run_records import AuditEvent
from dsmo.workflows.definition.model import parse_definition

AGENT = parse_definition(
    {
        "agent": "support",
        "start": "think",
        "nodes": {
            "think": {
                "actionType": "llm",
                "prompt": "{{input.q}}",
                "transitions": [{"when": 'stages.think.summary.action == "tool"', "to": "tool"}, {"to": "bye"}],
            },
            "tool": {"actionType": "run_agent", "agent": "lookup", "next": "think"},
            "bye": {"actionType": "send_message", "parameters": {"message": "bye"}},
        },
    }
)
B = "s3://bucket/artifacts"


def _trail(*entries: tuple[str, str | None, dict[str, Any]]) -> list[AuditEvent]:
    at = datetime(2026, 11, 26, tzinfo=UTC)
    events = []
    for seq, (kind, stage, extra) in enumerate(entries, start=1):
        fields = {
            "attempt": extra.pop("attempt", None),
            "artifact_uris": extra.pop("uris", []),
            "workflow_version": extra.pop("version", "v1"),
            "run_id": extra.pop("run", "r"),
        }
        events.append(AuditEvent(seq=seq, type=kind, at=at, stage=stage, data=extra, **fields))
    return events


LOOP = _trail(
    ("STAGE_ENQUEUED", "think", {"attempt": 1}),
    ("STAGE_SUCCEEDED", "think", {"attempt": 1, "uris": [f"{B}/v1/r/think/attempt=1/output.json"]}),
    ("STAGE_ENQUEUED", "tool", {"attempt": 1}),
    ("STAGE_SUCCEEDED", "tool", {"attempt": 1, "uris": [f"{B}/v1/r/tool/attempt=1/output.json"]}),
    ("STAGE_ENQUEUED", "think", {"attempt": 1}),  # visit 2: its first attempt lost its worker
    ("STAGE_FAILED", "think", {"attempt": 1}),
    ("STAGE_ENQUEUED", "think", {"attempt": 2}),
    ("STAGE_SUCCEEDED", "think", {"attempt": 2, "uris": [f"{B}/v1/r/think.v2/attempt=2/output.json"]}),
    ("STAGE_SUCCEEDED", "noted", {"action": "note", "output": {}, "uris": ["s3://x"]}),  # a saga action
    ("STAGE_ENQUEUED", "tool", {"attempt": 1}),
    ("STAGE_SUCCEEDED", "tool", {"attempt": 1, "uris": [f"{B}/v1/r/tool.v2/attempt=1/output.json"]}),
    ("RUN_MIGRATED", None, {}),
    ("STAGE_ENQUEUED", "think", {"attempt": 1, "version": "v2"}),  # visit 3, after a move: never committed
    ("STAGE_FAILED", "think", {"attempt": 1, "version": "v2"}),
)


def test_every_committed_visit_is_keyed_by_node_and_visit_and_saga_actions_are_not_stages() -> None:
    assert [key for key, _ in stage_visits(LOOP)] == ["think", "tool", "think.v2", "tool.v2"]
    assert dict(stage_visits(LOOP))["think.v2"].attempt == 2
    assert reused_outputs(AGENT, LOOP, None) == {
        "think": f"{B}/v1/r/think/attempt=1/output.json",
        "tool": f"{B}/v1/r/tool/attempt=1/output.json",
        "think.v2": f"{B}/v1/r/think.v2/attempt=2/output.json",
        "tool.v2": f"{B}/v1/r/tool.v2/attempt=1/output.json",
    }
    assert reused_outputs(AGENT, LOOP, "tool") == {"think": f"{B}/v1/r/think/attempt=1/output.json"}
    assert visit_key("think", 1) == "think" and visit_key("think", 3) == "think.v3"


def test_each_llm_visit_is_read_at_its_committed_attempt_under_the_version_that_recorded_it() -> None:
    records = recorded_llm_visits(AGENT, LOOP, lambda key: f"s3://bucket/{key}")
    assert records == {
        "think": RecordedVisit(folder=f"{B}/v1/r/think/", committed=1),
        "think.v2": RecordedVisit(folder=f"{B}/v1/r/think.v2/", committed=2),
        "think.v3": RecordedVisit(folder=f"{B}/v2/r/think.v3/"),  # the version it ran under
    }
    # The replay's first attempt of visit 2 reads the attempt that committed; an uncommitted
    # visit is read attempt by attempt.
    assert records["think.v2"].attempt_folder(1) == f"{B}/v1/r/think.v2/attempt=2/"
    assert records["think.v3"].attempt_folder(2) == f"{B}/v2/r/think.v3/attempt=2/"


def test_a_visit_reused_from_another_run_is_read_where_that_run_recorded_it() -> None:
    reused = _trail(
        ("STAGE_ENQUEUED", "think", {"attempt": 1, "run": "fork"}),
        (
            "STAGE_SUCCEEDED",
            "think",
            {"attempt": 1, "run": "fork", "uris": [f"{B}/v0/orig/think/attempt=3/output.json"]},
        ),
    )
    assert recorded_llm_visits(AGENT, reused, lambda key: key) == {
        "think": RecordedVisit(folder=f"{B}/v0/orig/think/", committed=3)
    }


def test_a_plan_without_llm_records_is_an_older_plan() -> None:
    assert ReplayPlan(of="r").llm_records is None
    plan = ReplayPlan.model_validate({"of": "r", "llmRecords": {"think.v2": {"folder": "s3://b/x/", "committed": 2}}})
    assert plan.llm_records == {"think.v2": RecordedVisit(folder="s3://b/x/", committed=2)}


def test_only_a_record_limit_is_a_problem_and_the_visit_key_names_its_node() -> None:
    assert record_problem("stage think (llm) failed (InvalidInput): llm replay: no recorded response 1")
    assert record_problem("replay diverged: the original run never resumed ask") is not None
    assert record_problem("stage refund (refund) failed (InvalidInput): bad amount") is None
    assert record_problem(None) is None
    assert [_node_of(key, AGENT) for key in ("think", "think.v3", "tool.v12", "gone.v2", "think.vx")] == [
        "think",
        "think",
        "tool",
        None,
        None,
    ]


def _run(run_id: str, same: bool, problem: str | None = None) -> WhatIfRun:
    path = ["think", "bye"] if same else ["think", "tool"]
    return WhatIfRun(
        run_id, f"{run_id}.whatif", same, ["think", "bye"], path, None, None, None, "completed", "failed", problem
    )


def test_a_run_the_record_cannot_answer_is_an_error_not_a_divergence() -> None:
    batch = BatchReport("what-if", "q", False, datetime(2026, 11, 26, tzinfo=UTC))
    batch.outcomes = [
        RunOutcome("a", "done", "same path"),
        RunOutcome("b", "done", "diverged"),
        RunOutcome("c", "failed", "could not be replayed: llm replay: ..."),
    ]
    runs = [_run("a", True), _run("b", False), _run("c", False, "llm replay: no recorded model calls")]
    summary = WhatIfReport(AGENT, batch, runs).summary()
    assert (summary["runs"], summary["samePath"], summary["diverged"], summary["errors"]) == (3, 1, 1, 1)
    assert sum(summary["byDivergence"].values()) == 1
