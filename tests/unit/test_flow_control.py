"""Concurrency keys in a definition: refused at admission naming the field, rendered per run, one lock per value."""

from __future__ import annotations

import pytest

from dsmo.client.definition_files import parse_definition_text
from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.definition.flow_control import FlowControlError, lock_id, slots_of
from dsmo.workflows.definition.model import AgentDefinition

FLOW = """
agent: flow-unit
inputs: [conversation, tenant]
concurrency:
{blocks}
start: ask
nodes:
  ask:
    actionType: wait_for_response
    parameters: {{timeout: 1h}}
"""


def _flow(*blocks: str) -> AgentDefinition:
    return parse_definition_text(FLOW.format(blocks="\n".join(f"  - {block}" for block in blocks)))


@pytest.mark.parametrize(
    ("block", "words"),
    [
        ('{key: "{{stages.x.summary}}"}', "concurrency.0.key: {{stages.x.summary}} is not known when a run starts"),
        ('{key: "{{customer}}"}', "concurrency.0.key: 'customer' is not an input (inputs: conversation, tenant)"),
        ('{key: "all"}', "concurrency.0.key: 'all' names no input variable"),
        ('{key: "{{conversation.id"}', "concurrency.0.key: "),
        ('{key: "{{conversation.id}}", limit: 0}', "concurrency.0.limit"),
        ('{key: "{{conversation.id}}", scope: "team"}', "concurrency.0.scope"),
        ('{key: "{{conversation.id}}", onBusy: "drop"}', "concurrency.0.onBusy"),
    ],
)
def test_a_bad_block_is_refused_naming_the_field(block: str, words: str) -> None:
    with pytest.raises(DefinitionError) as refused:
        _flow(block)
    assert words in str(refused.value)


def test_keys_that_hold_while_waiting_and_keys_that_do_not_are_refused_together() -> None:
    with pytest.raises(DefinitionError, match=r"concurrency\.1\.holdWhileWaiting: the keys of one definition all hold"):
        _flow('{key: "{{conversation.id}}"}', '{key: "{{tenant}}", limit: 5, holdWhileWaiting: false}')


def test_two_keys_that_say_what_a_busy_start_does_are_refused() -> None:
    with pytest.raises(DefinitionError, match=r"concurrency\.1\.onBusy: only one key"):
        _flow('{key: "{{conversation.id}}", onBusy: reject}', '{key: "{{tenant}}", onBusy: cancel-previous}')


def test_a_run_s_slots_are_one_lock_per_key_value_taken_in_one_order() -> None:
    definition = _flow('{key: "{{conversation.id}}"}', '{key: "{{tenant}}", limit: 5, scope: "group:billing"}')
    assert definition.concurrency is not None
    slots = slots_of(definition.agent, definition.concurrency, {"conversation": {"id": "c-1"}, "tenant": "acme"}, "q")
    assert [slot.lock for slot in slots] == sorted(slot.lock for slot in slots)
    by_key = {slot.key: slot for slot in slots}
    assert by_key["c-1"].lock == lock_id("flow-unit", "c-1", "q") and by_key["c-1"].label == "conversation.id=c-1"
    assert by_key["acme"].owner == "group-billing" and by_key["acme"].limit == 5
    # Two runs of one conversation share a lock; another conversation has its own.
    other = slots_of(definition.agent, definition.concurrency, {"conversation": {"id": "c-2"}, "tenant": "acme"}, "q")
    assert {slot.lock for slot in other} & {slot.lock for slot in slots} == {by_key["acme"].lock}


def test_a_missing_or_empty_key_value_names_the_field() -> None:
    definition = _flow('{key: "{{conversation.id}}"}')
    assert definition.concurrency is not None
    with pytest.raises(FlowControlError, match=r"^concurrency\.0\.key: "):
        slots_of(definition.agent, definition.concurrency, {"tenant": "acme"}, "q")
    with pytest.raises(FlowControlError, match="renders empty"):
        slots_of(definition.agent, definition.concurrency, {"conversation": {"id": " "}}, "q")


def test_a_definition_without_keys_hashes_as_before() -> None:
    text = FLOW.replace("concurrency:\n{blocks}\n", "").replace("{{", "{").replace("}}", "}")
    assert "concurrency" not in parse_definition_text(text).canonical_json()


@pytest.mark.parametrize(
    ("throttle", "words"),
    [
        ("throttle: {limit: 0, period: 1m}", "throttle.limit"),
        ("throttle: {limit: 5, period: 2d}", "throttle.period: must be between 1s and 1d"),
        ('throttle: {key: "{{stages.x}}", limit: 5, period: 1m}', "throttle.key: {{stages.x}} is not known"),
    ],
)
def test_a_bad_throttle_is_refused_naming_the_field(throttle: str, words: str) -> None:
    text = FLOW.replace("concurrency:\n{blocks}\n", throttle + "\n").replace("{{", "{").replace("}}", "}")
    text = text.replace('"{stages.x}"', '"{{stages.x}}"')
    with pytest.raises(DefinitionError) as refused:
        parse_definition_text(text)
    assert words in str(refused.value)


def test_a_bad_stage_throttle_is_refused_naming_the_node() -> None:
    text = FLOW.replace("concurrency:\n{blocks}\n", "").replace("{{", "{").replace("}}", "}")
    text = text.replace(
        "parameters: {timeout: 1h}",
        "parameters: {timeout: 1h}\n    next: work\n  work:\n"
        "    actionType: run_agent\n    agent: a\n    throttle: {limit: 1, period: 0.5s}",
    )
    with pytest.raises(DefinitionError, match=r"nodes\.work\.throttle\.period: must be between 1s and 1d"):
        parse_definition_text(text)


def test_dsmo_status_says_why_a_run_waits_its_turn() -> None:
    from dsmo.cli.render import status_lines
    from dsmo.workflows.common.status import RunStatus
    from dsmo.workflows.contracts.run_records import StatusView

    pending = StatusView(
        run_id="r",
        agent="a",
        workflow_version="w",
        status=RunStatus.PENDING,
        pending_reason="queued: k=1; 1 of 2 in line",
    )
    throttled = StatusView(
        run_id="r", agent="a", workflow_version="w", status=RunStatus.RUNNING, throttled="stage s ..."
    )
    assert any(
        line.split() == ["pending", "queued:", "k=1;", "1", "of", "2", "in", "line"]
        for line in status_lines(pending, run_url="u")
    )
    assert any(line.split() == ["throttled", "stage", "s", "..."] for line in status_lines(throttled, run_url="u"))
