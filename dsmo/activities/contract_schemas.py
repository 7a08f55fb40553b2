"""The schemas an agent declares for its input, output and summary: pydantic models or JSON Schema.

Either form is turned into one JSON Schema (Draft 2020-12) and checked with the `jsonschema`
library, so a schema written by hand and one generated from a model behave alike. A document
that fails is a contract violation, the same failure as an oversized summary.

`pattern` and `patternProperties` are matched by RE2, in time linear in the text (Python's `re`
backtracks: one crafted answer could hold a worker for minutes); a schema with a pattern RE2
cannot compile does not compile here either (see `workflows/common/schema_patterns.py`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, ValidationError
from pydantic import BaseModel

from dsmo.activities.plugin_errors import ContractViolation
from dsmo.workflows.common.schema_patterns import UnsupportedPattern, check_patterns, compiled

SchemaSource = type[BaseModel] | Mapping[str, Any]


class SchemaDoesNotCompile(ValueError):
    """A declared schema that is not a valid JSON Schema (or not a pydantic model)."""


@dataclass(frozen=True)
class ContractSchema:
    """One compiled schema: its JSON form (for catalogs and docs) and its validator."""

    json_schema: dict[str, Any]
    validator: jsonschema.protocols.Validator

    def check(self, document: Any, *, agent: str, what: str) -> None:
        """Raise ContractViolation naming the first failing field, if ``document`` does not match."""
        try:
            error = jsonschema.exceptions.best_match(self.validator.iter_errors(document))
        except RecursionError:
            # A document nested deeper than the interpreter's stack, or a schema that refers to
            # itself without end (`$ref: "#"`): either way the document cannot be held to it.
            raise ContractViolation(
                f"agent {agent}: {what} cannot be checked against its schema: it nests too deep, "
                "or the schema refers to itself without end"
            ) from None
        if error is None:
            return
        path = [str(part) for part in error.absolute_path]
        reason = rule_broken(error)
        if error.validator == "required" and isinstance(error.instance, dict):
            # Name the missing field itself, not the object that lacks it.
            missing = [name for name in error.validator_value if name not in error.instance]
            path, reason = [*path, *missing[:1]], "is required"
        field = ".".join(path) or what
        raise ContractViolation(f"agent {agent}: {what} does not match its schema: {field}: {reason}")


# What a failing keyword says, naming the rule but never the value that broke it: the message
# goes into the audit trail, which is not sealed with a data subject's key.
_RULES = {
    "type": "is not of type {rule}",
    "pattern": "does not match {rule}",
    "format": "is not a valid {rule}",
    "enum": "is not one of the values the schema allows",
    "const": "is not the value the schema requires",
    "minimum": "is less than the minimum {rule}",
    "maximum": "is greater than the maximum {rule}",
    "exclusiveMinimum": "is not greater than {rule}",
    "exclusiveMaximum": "is not less than {rule}",
    "multipleOf": "is not a multiple of {rule}",
    "minLength": "is shorter than {rule} character(s)",
    "maxLength": "is longer than {rule} character(s)",
    "minItems": "has fewer than {rule} item(s)",
    "maxItems": "has more than {rule} item(s)",
    "uniqueItems": "has items that are not unique",
    "minProperties": "has fewer than {rule} propert(ies)",
    "maxProperties": "has more than {rule} propert(ies)",
}
# Keywords whose messages name only the schema's own words (property names), never a value.
_OWN_MESSAGES = {"additionalProperties", "patternProperties", "dependentRequired", "required"}


def rule_broken(error: ValidationError) -> str:
    """What ``error`` says was wrong, by the rule it broke: never the failing value itself.

    jsonschema's own messages quote the value (``'K-17' does not match '^X'``); a document that
    fails may hold personal data, and the message lands in the trail.
    """
    keyword = str(error.validator)
    if keyword in _OWN_MESSAGES:
        return error.message[:200]
    template = _RULES.get(keyword)
    if template is None:
        return f"fails the schema's {keyword!r} rule"
    return template.format(rule=repr(error.validator_value)[:80])


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
        check_patterns(schema)
    except SchemaError as err:
        where = "/".join(str(part) for part in err.absolute_path) or "schema"
        raise SchemaDoesNotCompile(f"{where}: {err.message}") from None
    except UnsupportedPattern as err:
        raise SchemaDoesNotCompile(str(err)) from None
    return ContractSchema(schema, _linear(validator_class)(schema))


@functools.cache
def _linear(validator_class: type[jsonschema.protocols.Validator]) -> Any:
    """``validator_class`` with every keyword that matches a pattern matching it with RE2."""
    return jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        validator_class,
        {"pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional},
    )


# The three keywords below are jsonschema's own (jsonschema/_keywords.py), with RE2 for `re`.


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not compiled(pattern).search(instance):
        yield ValidationError(f"{instance[:80]!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if compiled(pattern).search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = [compiled(pattern) for pattern in schema.get("patternProperties", {})]
    extras = [key for key in instance if key not in properties and not any(pattern.search(key) for pattern in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if patterns:
            listed = ", ".join(repr(each) for each in sorted(extras))
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{listed} {verb} not match any of the regexes: {regexes}")
        else:
            listed = ", ".join(repr(each) for each in sorted(extras, key=str))
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


@functools.lru_cache(maxsize=256)
def compiled_schema(schema_json: bytes) -> ContractSchema:
    """A definition's JSON Schema (an answer's, a tool's arguments'), compiled once per worker:
    every run of a version sends the same one.

    Raises:
        SchemaDoesNotCompile: It is not a valid JSON Schema.
    """
    compiled = compile_schema(json.loads(schema_json))
    assert compiled is not None
    return compiled
