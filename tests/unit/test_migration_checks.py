"""Whether a run may move to another version: each refusal named before anything moves."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dsmo.workflows.definition.migration_checks import MigrationRefused, RunPosition, plan_migration
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from dsmo.workflows.events.resume_events import ResumeEvent

V1: dict[str, Any] = {
    "agent": "onboarding",
    "version": "1.0.0",
    "start": "docs",
    "nodes": {
        "docs": {"actionType": "request_document", "parameters": {"documents": ["id_card", "payslip"]}, "next": "sign"},
        "sign": {"actionType": "request_signature", "parameters": {"document": "s3://contract"}, "next": "bye"},
        "bye": {"actionType": "send_message", "parameters": {"message": "welcome"}},
    },
}


def version_2(**changes: Any) -> AgentDefinition:
    """V1 with a check before the signature and `sign` renamed `signature`, plus ``changes``."""
    data = copy.deepcopy(V1)
    data["version"] = "2.0.0"
    data["nodes"]["docs"]["next"] = "check"
    data["nodes"]["check"] = {"actionType": "send_message", "parameters": {"message": "checking"}, "next": "signature"}
    data["nodes"]["signature"] = data["nodes"].pop("sign")
    data.update(changes)
    return parse_definition(data)


def doc(event_id: str, document: str) -> ResumeEvent:
    return ResumeEvent(type="DOCUMENT_UPLOADED", event_id=event_id, data={"document": document, "url": "s3://x"})


def test_a_waiting_run_moves_to_the_node_of_the_same_id_and_keeps_the_events_a_wait_ahead_takes() -> None:
    position = RunPosition(node="docs", waiting_for="document", kept=[doc("e1", "payslip")])
    plan = plan_migration(parse_definition(V1), version_2(), position)
    assert (plan.node, plan.no_op, plan.expiring) == ("docs", False, ())


def test_a_renamed_node_moves_by_the_map() -> None:
    position = RunPosition(node="sign", waiting_for="signature")
    plan = plan_migration(parse_definition(V1), version_2(), position, {"sign": "signature"})
    assert plan.node == "signature" and dict(plan.node_map) == {"sign": "signature"}


def test_a_kept_event_no_wait_ahead_takes_expires_with_the_move() -> None:
    target = version_2()
    # At `signature`, no document wait lies ahead in version 2: the early upload has nowhere to go.
    position = RunPosition(node="sign", waiting_for="signature", kept=[doc("late", "payslip")])
    plan = plan_migration(parse_definition(V1), target, position, {"sign": "signature"})
    assert plan.expiring == ("late",)


def test_the_same_version_again_is_a_no_op() -> None:
    source = parse_definition(V1)
    plan = plan_migration(
        source, parse_definition(copy.deepcopy(V1)), RunPosition(node="sign", waiting_for="signature")
    )
    assert plan.no_op and plan.node == "sign"


def test_a_run_not_yet_at_a_node_starts_the_target_from_its_start() -> None:
    plan = plan_migration(parse_definition(V1), version_2(), RunPosition(node=None))
    assert plan.node is None and not plan.no_op


@pytest.mark.parametrize(
    ("position", "node_map", "target_changes", "reason"),
    [
        (RunPosition(node="sign", waiting_for="signature"), {}, {}, "node: 'sign' has no counterpart in version 2.0.0"),
        (
            RunPosition(node="sign", waiting_for="signature"),
            {"sign": "check"},
            {},
            "node: the run waits for signature at 'sign'; 'check' in version 2.0.0 is a send_message node",
        ),
        (
            RunPosition(node="docs", waiting_for="document"),
            {"docs": "signature"},
            {},
            "'signature' in version 2.0.0 waits for signature",
        ),
        (RunPosition(node="docs"), {"nope": "docs"}, {}, "map nope:docs: version 1.0.0 has no node 'nope'"),
        (RunPosition(node="docs"), {"docs": "nope"}, {}, "map docs:nope: version 2.0.0 has no node 'nope'"),
        (RunPosition(node="docs"), {}, {"agent": "payroll"}, "target: agent 'payroll' is not the run's agent"),
    ],
)
def test_each_refusal_names_its_reason(
    position: RunPosition, node_map: dict[str, str], target_changes: dict[str, Any], reason: str
) -> None:
    with pytest.raises(MigrationRefused) as refused:
        plan_migration(parse_definition(V1), version_2(**target_changes), position, node_map)
    assert reason in str(refused.value) and "\n" not in str(refused.value)


def test_a_wait_may_be_left_when_asked() -> None:
    position = RunPosition(node="sign", waiting_for="signature")
    plan = plan_migration(parse_definition(V1), version_2(), position, {"sign": "check"}, leave_wait=True)
    assert plan.node == "check"


def test_a_version_that_reads_a_variable_the_run_lacks_is_refused_naming_it() -> None:
    data = copy.deepcopy(V1)
    data["version"] = "2.0.0"
    data["nodes"]["bye"]["parameters"]["message"] = "welcome, {{ candidate.name }} ({{ priority }})"
    position = RunPosition(node="sign", waiting_for="signature", variables={"candidate": {"name": "Ana"}})
    with pytest.raises(MigrationRefused, match=r"^variables: .*reads 'priority' from 'sign' on.*--set priority="):
        plan_migration(parse_definition(V1), parse_definition(data), position)
    supplied = RunPosition(node="sign", waiting_for="signature", variables={"candidate": {}, "priority": "high"})
    assert plan_migration(parse_definition(V1), parse_definition(data), supplied).node == "sign"


def test_a_variable_with_a_default_or_set_by_a_wait_ahead_is_not_needed() -> None:
    data = copy.deepcopy(V1)
    data["version"] = "2.0.0"
    data["nodes"]["bye"]["parameters"]["message"] = '{{ nickname | default("friend") }} signed at {{ signedAt }}'
    position = RunPosition(node="sign", waiting_for="signature", variables={})
    assert plan_migration(parse_definition(V1), parse_definition(data), position).node == "sign"


def test_a_stage_output_neither_held_nor_produced_ahead_is_needed() -> None:
    data = copy.deepcopy(V1)
    data["version"] = "2.0.0"
    # Version 2 reviews the documents before the signature: a run already at the signature
    # skipped the review, so the farewell that quotes it has nothing to quote.
    data["nodes"]["docs"]["next"] = "review"
    data["nodes"]["review"] = {"actionType": "run_agent", "agent": "reviewer", "next": "sign"}
    data["nodes"]["bye"]["parameters"]["message"] = "score {{ stages.review.output.score }}"
    position = RunPosition(node="sign", waiting_for="signature", variables={"stages": {}})
    with pytest.raises(MigrationRefused, match=r"'stages\.review'"):
        plan_migration(parse_definition(V1), parse_definition(data), position)
    held = RunPosition(node="sign", waiting_for="signature", variables={"stages": {"review": {"output": {}}}})
    assert plan_migration(parse_definition(V1), parse_definition(data), held).node == "sign"


def test_a_condition_ahead_is_read_for_its_variables_too() -> None:
    data = copy.deepcopy(V1)
    data["version"] = "2.0.0"
    data["inputs"] = ["tier"]
    del data["nodes"]["sign"]["next"]
    data["nodes"]["sign"]["transitions"] = [{"to": "bye", "when": 'tier == "gold"'}, {"to": "bye2"}]
    data["nodes"]["bye2"] = {"actionType": "send_message", "parameters": {"message": "ok"}}
    position = RunPosition(node="sign", waiting_for="signature", variables={})
    with pytest.raises(MigrationRefused, match="'tier'"):
        plan_migration(parse_definition(V1), parse_definition(data), position)


def test_every_node_of_a_definition_reaches_an_end_so_a_mapped_node_does_too() -> None:
    # The move needs no check of its own: a definition with a cycle that has no exit is never admitted.
    data = copy.deepcopy(V1)
    data["nodes"]["loop"] = {"actionType": "wait_for_event", "parameters": {"event": "tick"}, "next": "loop2"}
    data["nodes"]["loop2"] = {"actionType": "send_message", "parameters": {"message": "again"}, "next": "loop"}
    data["nodes"]["docs"]["transitions"] = [{"to": "sign", "when": "true"}, {"to": "loop"}]
    del data["nodes"]["docs"]["next"]
    with pytest.raises(ValueError, match="no path to an end node"):
        AgentDefinition.model_validate(data)
