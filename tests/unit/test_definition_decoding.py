"""A worker decodes each definition once: runs of a version share it; admission always checks in full."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.contracts.run_records import ExecutionRequest
from dsmo.workflows.definition import model as definition_module
from dsmo.workflows.definition.model import AgentDefinition, DecodedDefinitions, parse_definition

CONVERTER = pydantic_data_converter.payload_converter


def document(input_template: str = "{{stages.a.outputUri}}") -> dict[str, Any]:
    return {
        "agent": "decoding",
        "start": "a",
        "nodes": {
            "a": {"actionType": "run_agent", "agent": "echo", "next": "b"},
            "b": {"actionType": "run_agent", "agent": "echo", "input": input_template},
        },
    }


@pytest.fixture
def graph_checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A fresh memo, and the agent of every definition whose graph gets checked."""
    monkeypatch.setattr(definition_module, "_DECODED", DecodedDefinitions(max_entries=2))
    checked: list[str] = []
    real = definition_module.check_graph

    def counting(definition: AgentDefinition, *, admitting: bool = True) -> None:
        checked.append(definition.agent)
        real(definition, admitting=admitting)

    monkeypatch.setattr(definition_module, "check_graph", counting)
    yield checked


def decode(data: dict[str, Any]) -> AgentDefinition:
    """As a worker does: the definition arrives inside a run's request, as JSON."""
    payload = CONVERTER.to_payloads([{"definition": data, "input": {}}])[0]
    request = CONVERTER.from_payloads([payload], [ExecutionRequest])[0]
    assert isinstance(request, ExecutionRequest)
    return request.definition


def test_runs_of_one_version_share_one_decoded_definition(graph_checks: list[str]) -> None:
    first, second = decode(document()), decode(document())
    assert first is second
    assert graph_checks == ["decoding"]  # validated and checked once
    assert first == parse_definition(document())
    assert first.workflow_version == parse_definition(document()).workflow_version


def test_another_definition_is_decoded_on_its_own(graph_checks: list[str]) -> None:
    first = decode(document())
    other = decode(document("{{stages.a.summary}}"))
    assert other is not first and other.workflow_version != first.workflow_version
    assert len(graph_checks) == 2


def test_admission_always_checks_in_full(graph_checks: list[str]) -> None:
    # A run pinned to a definition that newer checks refuse keeps decoding (and replaying) ...
    lenient = document("{{stages.gone.outputUri}}")
    assert decode(lenient) is decode(lenient)
    # ... but having decoded it never admits it: publishing or starting it is still refused.
    with pytest.raises(DefinitionError, match="unknown stage 'gone'"):
        parse_definition(lenient)
    assert parse_definition(document()) is not parse_definition(document())
    assert graph_checks == ["decoding", "decoding", "decoding", "decoding"]


def test_a_definition_that_fails_to_decode_is_not_kept(graph_checks: list[str]) -> None:
    broken = document()
    broken["nodes"]["a"]["next"] = "nowhere"
    for _ in range(2):
        with pytest.raises(ValueError, match="unknown node 'nowhere'"):
            decode(broken)
    assert len(definition_module._DECODED) == 0
    assert len(graph_checks) == 2


def test_the_memo_keeps_the_newest_versions(graph_checks: list[str]) -> None:
    templates = ["{{stages.a.outputUri}}", "{{stages.a.summary}}", "{{stages.a.summary.route}}"]
    for template in templates:
        decode(document(template))
    assert len(definition_module._DECODED) == 2
    decode(document(templates[-1]))  # still kept
    decode(document(templates[0]))  # dropped: decoded again
    assert len(graph_checks) == 4


def test_a_copy_with_changes_has_its_own_version() -> None:
    original = parse_definition(document())
    version = original.workflow_version  # computed, then kept on the instance
    changed = original.model_copy(update={"start": "b"})
    assert changed.workflow_version != version
    assert changed.workflow_version == changed.model_copy().workflow_version
    assert original.model_copy().workflow_version == version


def test_a_request_built_from_a_definition_keeps_it_unchecked_again(graph_checks: list[str]) -> None:
    # A starter builds a request per run from the definition it loaded once: no second graph check.
    definition = parse_definition(document())
    checked = len(graph_checks)
    requests = [ExecutionRequest(definition=definition, input={"n": n}) for n in range(3)]
    assert all(request.definition is definition for request in requests)
    assert len(graph_checks) == checked
