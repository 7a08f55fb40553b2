"""Which stages run as local activities: the node's `local`, the definition's `localStages`, or `auto`."""

from __future__ import annotations

from typing import Any

import pytest

from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.definition.local_stages import chosen_by_default, runs_locally
from dsmo.workflows.definition.model import AgentDefinition, parse_definition


def graph(work: dict[str, Any], **options: Any) -> AgentDefinition:
    node = {"actionType": "run_agent", "agent": "triage", **work}
    return parse_definition({"agent": "a", "start": "work", "nodes": {"work": node}, **options})


@pytest.mark.parametrize(
    ("work", "options", "local", "by_default"),
    [
        ({}, {}, False, True),  # the default timeout (5 min) is long
        ({"timeout": "10s"}, {}, True, True),  # auto: at most 10 s
        ({"timeout": "11s"}, {}, False, True),
        ({"timeout": "2s"}, {"localStages": "never"}, False, False),
        ({"timeout": "10m"}, {"localStages": "always"}, True, False),
        ({"timeout": "10m", "local": True}, {}, True, False),
        ({"timeout": "1s", "local": False}, {"localStages": "always"}, False, False),
        ({"timeout": "1s"}, {"localStages": "auto"}, True, True),
    ],
)
def test_node_then_definition_then_auto(
    work: dict[str, Any], options: dict[str, Any], local: bool, by_default: bool
) -> None:
    definition = graph(work, **options)
    node = definition.nodes["work"]
    assert runs_locally(definition, node) is local
    assert chosen_by_default(definition, node) is by_default


def test_model_calls_and_waits_never_run_locally() -> None:
    definition = parse_definition(
        {
            "agent": "a",
            "start": "ask",
            "localStages": "always",
            "nodes": {
                "ask": {"actionType": "llm", "prompt": "hi", "timeout": "5s", "next": "wait"},
                "wait": {"actionType": "wait_for_response"},
            },
        }
    )
    assert not any(runs_locally(definition, node) for node in definition.nodes.values())


def test_local_is_refused_where_it_cannot_apply() -> None:
    with pytest.raises(DefinitionError, match="local"):
        parse_definition(
            {"agent": "a", "start": "ask", "nodes": {"ask": {"actionType": "llm", "prompt": "hi", "local": True}}}
        )
    with pytest.raises(DefinitionError, match="localStages"):
        graph({}, localStages="sometimes")


def test_definitions_without_the_options_keep_their_version() -> None:
    # The fields are new: a definition that does not use them hashes as it did before them.
    plain = graph({"timeout": "5s"})
    assert "local" not in plain.canonical_json()
    assert graph({"timeout": "5s", "local": True}).workflow_version != plain.workflow_version
