"""The exported JSON Schemas accept what DSMO accepts and refuse what it refuses."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from dsmo.client.wire_schemas import START_FIELDS, definition_schema, start_request_schema
from dsmo.workflows.contracts.run_records import ExecutionRequest

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
def test_every_example_is_a_valid_definition_and_start_request(path: Path) -> None:
    document = yaml.safe_load(path.read_text())
    jsonschema.validate(document, definition_schema())
    request = {"definition": document, "input": {"x": 1}, "correlationId": "c-1"}
    jsonschema.validate(request, start_request_schema())
    ExecutionRequest.model_validate(request)  # and the workflow takes it


def test_the_start_request_names_only_public_fields() -> None:
    schema = start_request_schema()
    assert tuple(schema["properties"]) == START_FIELDS
    with pytest.raises(jsonschema.ValidationError, match="checkpoint"):
        jsonschema.validate({"definition": {}, "checkpoint": {}}, schema)
    with pytest.raises(jsonschema.ValidationError, match="'definition' is a required property"):
        jsonschema.validate({"input": {}}, schema)
