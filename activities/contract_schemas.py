"""The schemas an agent declares for its input, output and summary: pydantic models or JSON Schema.

Either form is turned into one JSON Schema (Draft 2020-12) and checked with the `jsonschema`
library, so a schema written by hand and one generated from a model behave alike. A document
that fails is a contract violation, the same failure as an oversized summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel

from dsmo.activities.errors import ContractViolation

SchemaSource = type[BaseModel] | Mapping[str, Any]


class SchemaDoesNotCompile(ValueError):
    """A declared schema that is not a valid JSON Schema (or not a pydantic model)."""


@dataclass(frozen=True)
class ContractSchema:
    """One compiled schema: its JSON form (for catalogues and docs) and its validator."""

    json_schema: dict[str, Any]
    validator: jsonschema.protocols.Validator

    def check(self, document: Any, *, agent: str, what: str) -> None:
        """Raise ContractViolation naming the first failing field, if ``document`` does not match."""
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(document))
        if error is None:
            return
        path = [str(part) for part in error.absolute_path]
        reason = error.message[:200]
        if error.validator == "required" and isinstance(error.instance, dict):
            # Name the missing field itself, not the object that lacks it.
            missing = [name for name in error.validator_value if name not in error.instance]
            path, reason = [*path, *missing[:1]], "is required"
        field = ".".join(path) or what
        raise ContractViolation(f"agent {agent}: {what} does not match its schema: {field}: {reason}")


def compile_schema(source: SchemaSource | None) -> ContractSchema | None:
    """Compile a pydantic model class or a JSON Schema mapping; None stays None.

    Raises:
        SchemaDoesNotCompile: ``source`` is neither, or is not a valid JSON Schema.
    """
    if source is None:
        return None
    if isinstance(source, type) and issubclass(source, BaseModel):
        schema = source.model_json_schema()
    elif isinstance(source, Mapping):
        schema = dict(source)
    else:
        raise SchemaDoesNotCompile(f"expected a pydantic model class or a JSON Schema mapping, got {source!r}")
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator_class.check_schema(schema)
    except SchemaError as err:
        where = "/".join(str(part) for part in err.absolute_path) or "schema"
        raise SchemaDoesNotCompile(f"{where}: {err.message}") from None
    return ContractSchema(schema, validator_class(schema))
