"""`dsmo start` tells an agent name from a definition file; a file that holds no mapping says what it holds."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from dsmo.client.definition_files import names_agent, parse_definition_text
from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.definition.node_types import RunAgentNode


def test_a_name_that_is_no_file_names_an_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert names_agent("document-triage")
    assert not names_agent("examples/triage.yaml")  # a path: read as a file (and refused if missing)
    assert not names_agent("Triage")  # not an agent name
    (tmp_path / "triage").write_text("agent: triage\n")
    assert not names_agent("triage")  # a file of that name is here: it is read


@pytest.mark.parametrize(("text", "said"), [("", "an empty document"), ("- a\n- b\n", "list")])
def test_a_file_that_is_no_mapping_says_what_it_is(text: str, said: str) -> None:
    with pytest.raises(DefinitionError, match=f"a definition is a mapping with agent, start and nodes, not {said}$"):
        parse_definition_text(text, source="d.yaml")


def test_a_key_given_twice_is_refused_naming_it_and_both_lines() -> None:
    text = """agent: dup
start: A
nodes:
  A: {actionType: run_agent, agent: text-extract, next: B}
  B: {actionType: run_agent, agent: text-extract}
  A: {actionType: run_agent, agent: text-extract}
"""
    with pytest.raises(DefinitionError, match=r"line 6, column 3: key 'A' given twice \(first on line 4\)"):
        parse_definition_text(text)
    # Nested mappings, and JSON (read by the same parser), too.
    with pytest.raises(DefinitionError, match="key 'timeout' given twice"):
        parse_definition_text(
            text.replace("  A: {actionType: run_agent, agent: text-extract}\n", "").replace(
                "agent: text-extract}", "agent: text-extract, timeout: 5s, timeout: 9s}", 1
            )
        )
    with pytest.raises(DefinitionError, match="key 'start' given twice"):
        parse_definition_text('{"agent": "dup", "start": "A", "start": "B", "nodes": {}}')


def test_a_merge_key_may_override_what_it_merges() -> None:
    text = """agent: merged
start: A
nodes:
  A: &stage {actionType: run_agent, agent: text-extract, timeout: 5s, next: B}
  B: {<<: *stage, timeout: 9s, next: null}
"""
    definition = parse_definition_text(text)
    second = definition.nodes["B"]
    assert isinstance(second, RunAgentNode) and second.timeout == timedelta(seconds=9)
    assert second.next is None and definition.nodes["A"].next == "B"


def test_keys_are_compared_as_written_before_merges_and_the_value_key_still_loads() -> None:
    from dsmo.client.definition_files import _BoundedLoader

    # A mapping that overrides what it merges, merged again elsewhere: no key is written twice.
    assert yaml.load("a: {b: &s {<<: {t: 1}, t: 2}}\nc: {<<: *s}\n", Loader=_BoundedLoader)["a"] == {"b": {"t": 2}}
    # PyYAML's value key (=) is a plain string key, as safe_load reads it.
    assert yaml.load("parameters: {=: 1}\n", Loader=_BoundedLoader) == {"parameters": {"=": 1}}
    # A string key and a number key that read alike are two keys.
    assert yaml.load("'1': a\n1: b\n", Loader=_BoundedLoader) == {"1": "a", 1: "b"}
