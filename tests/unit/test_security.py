"""Security basics: no eval/exec, no key can escape its prefix, templates and conditions run no code."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from dsmo.activities.artifacts import ArtifactError, ArtifactStore, run_input_key, stage_output_key
from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.common.identifiers import InvalidRunId, check_run_id
from dsmo.workflows.definition.model import parse_definition

REPO = Path(__file__).resolve().parents[2]
SOURCES = [p for folder in ("dsmo", "starter", "bench") for p in (REPO / folder).rglob("*.py")]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_eval_or_exec(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in {"eval", "exec", "compile", "__import__"}, f"{path}: {node.func.id}()"


@pytest.mark.parametrize(
    "run_id",
    ["../etc", "a/../../b", "a/b", "..", "x..y", "/abs", "", " lead", "a" * 201, "run\x00id", "r%2e%2e", "ok?no"],
)
def test_run_ids_cannot_escape_their_prefix(run_id: str) -> None:
    with pytest.raises(InvalidRunId, match="run id"):
        check_run_id(run_id)


@pytest.mark.parametrize("run_id", ["candidate-screening-1a2b", "run.child.3", "comp:x:y", "A_1"])
def test_good_run_ids(run_id: str) -> None:
    check_run_id(run_id)
    assert stage_output_key("v", run_id, "stage", 1).startswith(f"artifacts/v/{run_id}/stage/")


@pytest.mark.parametrize(
    ("field", "value"),
    [("agent", "../evil"), ("agent", "a/b"), ("start", "../x")],
)
def test_agent_and_node_names_are_validated(field: str, value: str) -> None:
    data: dict[str, Any] = {
        "agent": "ok",
        "start": "n",
        "nodes": {"n": {"actionType": "send_message", "parameters": {"message": "x"}}},
    }
    data[field] = value
    with pytest.raises(DefinitionError):
        parse_definition(data)
    with pytest.raises(DefinitionError, match="invalid node id"):
        parse_definition({**data, "agent": "ok", "start": "n", "nodes": {"../n": data["nodes"]["n"]}})


def test_uris_outside_the_scheme_are_refused() -> None:
    store = ArtifactStore(None, "bucket")  # type: ignore[arg-type]
    for uri in ("file:///etc/passwd", "http://x/y", "s3://", "s3://bucket", "../x"):
        with pytest.raises(ArtifactError):
            store.key_of(uri)
    assert run_input_key("v", "r") == "artifacts/v/r/input.json"
