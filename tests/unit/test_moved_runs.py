"""A moved run's nodes judged by the version it is on now; its earlier record renamed by the move."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dsmo.client.definition_files import parse_definition_text
from dsmo.client.moved_runs import node_problem, on_version_now, record_definition
from dsmo.workflows.contracts.migration_io import MigrationRequest
from dsmo.workflows.contracts.replay_plan import RecordedMove, RecordedResume, ReplayPlan
from dsmo.workflows.contracts.run_records import AuditEvent

V1 = parse_definition_text(
    """
agent: a
version: "1.0.0"
start: documents
nodes:
  documents: {actionType: request_document, parameters: {documents: [id]}, next: contract}
  contract: {actionType: request_signature, parameters: {document: "s3://c.pdf"}, next: bye}
  bye: {actionType: send_message, parameters: {message: "bye"}}
"""
)
V2 = parse_definition_text(
    """
agent: a
version: "2.0.0"
start: papers
nodes:
  papers: {actionType: request_document, parameters: {documents: [id]}, next: check}
  check: {actionType: send_message, parameters: {message: "checking"}, next: contract}
  contract: {actionType: request_signature, parameters: {document: "s3://c.pdf"}, next: bye}
  bye: {actionType: send_message, parameters: {message: "bye"}}
"""
)
MOVE = RecordedMove(
    node="documents",
    waiting=True,
    resumes_before=1,
    request=MigrationRequest(definition=V2, node_map={"documents": "papers"}, set={"priority": "high"}),
)


def _event(seq: int, kind: str, stage: str, **data: Any) -> AuditEvent:
    return AuditEvent.model_validate(
        {
            "seq": seq,
            "type": kind,
            "runId": "r",
            "workflowVersion": "w",
            "at": datetime(2026, 1, 1, tzinfo=UTC),
            "stage": stage,
            "data": data,
        }
    )


def test_nodes_are_judged_by_the_version_the_run_is_on_now() -> None:
    assert node_problem("--from", "check", V1, [MOVE]) is None
    assert node_problem("--from", "contract", V1, [MOVE]) is None
    renamed = node_problem("--from", "documents", V1, [MOVE])
    assert renamed == (
        "--from: 'documents' is a node of a 1.0.0 only; the run moved to 2.0.0, which calls it 'papers' "
        "(name a node of 2.0.0)"
    )
    unknown = node_problem("--to", "nowhere", V1, [MOVE])
    assert unknown is not None and unknown.startswith("--to: 'nowhere' is not a node of a 2.0.0 (")
    assert node_problem("--from", "check", V1, []) is not None  # a run that never moved: its own version
    assert set(record_definition(V1, [MOVE]).nodes) == {"documents", "papers", "check", "contract", "bye"}


def test_the_record_before_a_move_is_renamed_by_its_node_map() -> None:
    events = [
        _event(1, "RUN_RESUMED", "documents"),
        _event(2, "RUN_MIGRATED", "papers", fromNode="documents", toNode="papers"),
        _event(3, "RUN_RESUMED", "papers"),
        _event(4, "RUN_RESUMED", "contract"),
    ]
    plan = ReplayPlan(
        of="r",
        resumes=[RecordedResume(node=n, event_type="DOCUMENT_UPLOADED") for n in ("documents", "papers", "contract")],
        moves=[MOVE],
        corrections={"priority": "low"},
    )
    moved = on_version_now(plan, events)
    assert [resume.node for resume in moved.resumes] == ["papers", "papers", "contract"]
    assert moved.moves == []
    assert moved.corrections == {"priority": "low"}  # the caller's own corrections win over the move's
    assert on_version_now(plan.model_copy(update={"corrections": {}}), events).corrections == {"priority": "high"}
    unmoved = plan.model_copy(update={"moves": []})
    assert on_version_now(unmoved, events) is unmoved
