"""The definition model: valid files load with a stable version; bad ones name the field."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from dsmo.client.definition_files import load_definition, parse_definition_text
from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.definition.model import RunAgentNode, WaitForResponseNode, parse_definition

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "candidate_screening.yaml"


def base() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return data


def test_example_loads_with_defaults() -> None:
    definition = load_definition(EXAMPLE)
    assert definition.agent == "candidate-screening"
    assert definition.start == "profile"
    profile = definition.nodes["profile"]
    assert isinstance(profile, RunAgentNode) and profile.retry.max_attempts == 3
    wait = definition.nodes["wait_reply"]
    assert isinstance(wait, WaitForResponseNode)
    assert wait.parameters.timeout == timedelta(hours=24) and wait.parameters.on_timeout == "continue"


def test_json_and_yaml_give_the_same_version(tmp_path: Path) -> None:
    as_json = tmp_path / "d.json"
    as_json.write_text(json.dumps(base()))
    assert load_definition(as_json).workflow_version == load_definition(EXAMPLE).workflow_version


def test_version_is_a_short_hash_of_the_canonical_form() -> None:
    one = parse_definition(base())
    explicit_defaults = base()
    explicit_defaults["nodes"]["profile"]["timeout"] = "5m"  # the default, written out
    reordered = dict(reversed(list(base().items())))
    changed = base()
    changed["nodes"]["ask"]["parameters"]["message"] = "otro mensaje"
    assert len(one.workflow_version) == 12
    assert parse_definition(explicit_defaults).workflow_version == one.workflow_version
    assert parse_definition(reordered).workflow_version == one.workflow_version
    assert parse_definition(changed).workflow_version != one.workflow_version


def test_fields_added_later_leave_the_version_of_a_definition_written_before_them() -> None:
    # Hashed before `llm` nodes had tools (maxTurns, ...) or approvals: a running run's version,
    # idempotency keys and artifact folders stay what they were when its worker is upgraded.
    plain: dict[str, Any] = {
        "agent": "a",
        "start": "t",
        "nodes": {
            "t": {"actionType": "llm", "prompt": "hi", "transitions": [{"to": "u"}]},
            "u": {"actionType": "send_message", "parameters": {"message": "x"}},
        },
    }
    assert parse_definition(plain).workflow_version == "bf51aa907ce8"
    written_out = copy.deepcopy(plain)
    written_out["nodes"]["t"] |= {"maxTurns": 8, "toolTimeout": "30s"}
    assert parse_definition(written_out).workflow_version == "bf51aa907ce8"
    more_turns = copy.deepcopy(plain)
    more_turns["nodes"]["t"]["maxTurns"] = 9
    assert parse_definition(more_turns).workflow_version != "bf51aa907ce8"


def test_wait_defaults_follow_the_seed() -> None:
    data = {"agent": "a", "start": "w", "nodes": {"w": {"actionType": "wait_for_response"}}}
    wait = parse_definition(data).nodes["w"]
    assert isinstance(wait, WaitForResponseNode)
    assert wait.parameters.timeout == timedelta(hours=24)


def mutate(path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(base())
    *parents, last = path.split(".")
    target = data
    for part in parents:
        target = target[part]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return data


DELETE = object()

BAD = [
    ("nodes.ask.next", "nope", "nodes.ask.next", "unknown node 'nope'"),
    ("start", "ghost", "start", "unknown node 'ghost'"),
    ("nodes.ask.actionType", "teleport", "nodes.ask.actionType", "unknown action 'teleport'"),
    ("nodes.ask.actionType", DELETE, "nodes.ask.actionType", "is required"),
    ("nodes.wait_reply.parameters.timeout", "8d", "nodes.wait_reply.parameters.timeout", "above the maximum of 7d"),
    ("nodes.wait_reply.parameters.timeout", "soon", "nodes.wait_reply.parameters.timeout", "invalid duration"),
    ("nodes.wait_reply.parameters.onTimeout", "explode", "nodes.wait_reply.parameters.onTimeout", "'continue'"),
    ("nodes.ask.parameters.message", DELETE, "nodes.ask.parameters.message", "is required"),
    ("nodes.ask.parameters.message", "hi {{ 1+1 }}", "nodes.ask.parameters.message", "invalid placeholder"),
    ("nodes.ask.colour", "red", "nodes.ask.colour", "is not a known field"),
    ("nodes.goodbye.next", "profile", "nodes.ask", "no path to an end node"),
    ("agent", DELETE, "agent", "is required"),
    ("agent", "Bad Name", "agent", "should match pattern"),
    ("nodes.profile.agent", DELETE, "nodes.profile.agent", "is required"),
    ("nodes.profile.retry", {"maxAttempts": 0}, "nodes.profile.retry.maxAttempts", "greater than or equal to 1"),
    ("nodes", {}, "nodes", "at least 1 item"),
]


@pytest.mark.parametrize(
    ("path", "value", "field", "reason"),
    BAD,
    ids=[f"{b[0]}={'<deleted>' if b[1] is DELETE else repr(b[1])}"[:60] for b in BAD],  # the same ids in every process
)
def test_bad_definition_names_the_field(path: str, value: Any, field: str, reason: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_definition(mutate(path, value), source="def.yaml")
    err = caught.value
    assert err.field == field
    assert reason in err.reason
    assert str(err).startswith(f"def.yaml: {field}: ")
    assert "\n" not in str(err)


def test_bad_node_id() -> None:
    data = base()
    data["nodes"]["bad id"] = data["nodes"].pop("goodbye")
    data["nodes"]["ask"]["next"] = "wait_reply"
    with pytest.raises(DefinitionError, match="invalid node id 'bad id'"):
        parse_definition(data)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("agent: [unclosed", "not valid YAML/JSON (line 1"),
        ("- just\n- a list", "a definition is a mapping"),
        ("", "a definition is a mapping"),
    ],
)
def test_unparseable_files(text: str, reason: str) -> None:
    with pytest.raises(DefinitionError, match=reason.replace("(", r"\(")):
        parse_definition_text(text, source="x.yaml")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError, match="file not found"):
        load_definition(tmp_path / "none.yaml")


def test_sensitive_entries_are_event_variables_or_stage_summary_fields() -> None:
    from dsmo.workflows.definition.sensitive import fingerprint, masked_summary, masked_variables

    base = {
        "agent": "private",
        "start": "profile",
        "nodes": {
            "profile": {"actionType": "run_agent", "agent": "candidate-profile", "next": "wait"},
            "wait": {"actionType": "wait_for_response"},
        },
    }
    ok = parse_definition({**base, "sensitive": ["lastResponse", "stages.profile.summary.firstName"]})
    assert ok.sensitive == ["lastResponse", "stages.profile.summary.firstName"]
    assert parse_definition(base).workflow_version != ok.workflow_version
    for entry, reason in [
        ("candidate", "not a value the audit trail records"),
        ("stages.wait.summary.x", "'wait' is not a run_agent node"),
    ]:
        with pytest.raises(DefinitionError, match=rf"sensitive\.0: '{entry}': .*{reason}"):
            parse_definition({**base, "sensitive": [entry]})
    assert masked_variables({"lastResponse": "mi DNI", "x": 1}, ["lastResponse"]) == {
        "lastResponse": fingerprint("mi DNI"),
        "x": 1,
    }
    assert fingerprint("mi DNI").startswith("sha256:") and fingerprint({"b": 1, "a": 2}) == fingerprint(
        {"a": 2, "b": 1}
    )
    assert masked_summary("profile", {"firstName": "Ana", "n": 2}, ["stages.profile.summary.firstName"]) == {
        "firstName": fingerprint("Ana"),
        "n": 2,
    }
