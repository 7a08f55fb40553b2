"""JSON Schemas of what outside systems send DSMO: an agent definition, and the request that
starts a run with the official `temporal` CLI or any Temporal SDK."""

from __future__ import annotations

from typing import Any

from dsmo.workflows.contracts.run_records import ExecutionRequest
from dsmo.workflows.definition.model import AgentDefinition

# The fields of the AgentExecution workflow's input an outside starter sets. The others
# (checkpoint, replay, prepared, ...) are written by DSMO itself and may change between versions.
START_FIELDS = ("definition", "input", "correlationId", "historyLimit")


def definition_schema() -> dict[str, Any]:
    """JSON Schema of an agent definition (the YAML/JSON document)."""
    schema = AgentDefinition.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def start_request_schema() -> dict[str, Any]:
    """JSON Schema of the AgentExecution workflow input, as an outside starter sends it.

    Example: `temporal workflow start --type AgentExecution --task-queue agent-executions
    --workflow-id RUN --input '{"definition": {...}, "input": {...}}'`.
    """
    full = ExecutionRequest.model_json_schema(by_alias=True)
    properties = {name: full["properties"][name] for name in START_FIELDS}
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "AgentExecution start request",
        "description": (
            "Input of the AgentExecution workflow (task queue agent-executions). The workflow writes the "
            "input artifact and config snapshot and sets the AgentName, WorkflowVersion and "
            "AgentExecutionStatus search attributes on its first task."
        ),
        "type": "object",
        "properties": properties,
        "required": ["definition"],
        "additionalProperties": False,
    }
    schema["$defs"] = _reachable_defs(properties, full.get("$defs", {}))
    return schema


def _reachable_defs(root: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The `$defs` entries ``root`` refers to, directly or through each other."""
    found: dict[str, Any] = {}
    pending = [root]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref.removeprefix("#/$defs/")
                if name not in found:
                    found[name] = defs[name]
                    pending.append(defs[name])
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return dict(sorted(found.items()))
