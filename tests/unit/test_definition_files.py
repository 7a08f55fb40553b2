"""`dsmo start` tells an agent name from a definition file; a file that holds no mapping says what it holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsmo.client.definition_files import names_agent, parse_definition_text
from dsmo.workflows.common.errors import DefinitionError


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
