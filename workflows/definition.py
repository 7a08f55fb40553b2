"""The agent definition: a versioned graph of nodes, loaded from YAML or JSON.

Field names follow the seed (camelCase in files, snake_case in Python). The graph is
checked when the definition is loaded, so a run never starts on a broken one.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any

from pydantic import Field, model_validator

from workflows.errors import DefinitionError, TemplateError
from workflows.nodes import (
    ACTION_TYPES,
    AssignTestNode,
    CamelModel,
    DelayNode,
    RequestDocumentNode,
    RequestSignatureNode,
    RunAgentNode,
    SendMessageNode,
    TriggerAgentNode,
    WaitForEventNode,
    WaitForResponseNode,
)
from workflows.templating import placeholders

NODE_ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"

__all__ = [
    "ACTION_TYPES",
    "AgentDefinition",
    "Node",
    "RateLimit",
    "RunAgentNode",
    "WaitForResponseNode",
    "parse_definition",
]

Node = Annotated[
    SendMessageNode
    | WaitForResponseNode
    | RequestDocumentNode
    | RequestSignatureNode
    | AssignTestNode
    | WaitForEventNode
    | TriggerAgentNode
    | DelayNode
    | RunAgentNode,
    Field(discriminator="action_type"),
]


class RateLimit(CamelModel):
    """Runs of this agent allowed at once; the others wait their turn in PENDING."""

    max_concurrent: int = Field(ge=1, le=10_000)


class AgentDefinition(CamelModel):
    agent: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    version: str = Field(default="1.0.0", min_length=1, max_length=50)
    description: str | None = Field(default=None, max_length=2000)
    start: str
    nodes: dict[Annotated[str, Field(pattern=NODE_ID_PATTERN)], Node] = Field(min_length=1, max_length=500)
    rate_limit: RateLimit | None = None

    @model_validator(mode="after")
    def _check_graph(self) -> AgentDefinition:
        known = ", ".join(sorted(self.nodes))
        if self.start not in self.nodes:
            raise ValueError(f"@start: unknown node {self.start!r} (nodes: {known})")
        for node_id, node in self.nodes.items():
            if node.next is not None and node.next not in self.nodes:
                raise ValueError(f"@nodes.{node_id}.next: unknown node {node.next!r} (nodes: {known})")
            for field, template in _templates(node):
                try:
                    placeholders(template)
                except TemplateError as err:
                    raise ValueError(f"@nodes.{node_id}.{field}: {err}") from None
        _check_acyclic(self)
        return self

    @property
    def workflow_version(self) -> str:
        """Short hash of the canonical definition: equal graphs, equal versions."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:12]

    def canonical_json(self) -> str:
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _templates(node: Any) -> list[tuple[str, str]]:
    """Every string in a node's parameters (templates may appear in any of them)."""
    found: list[tuple[str, str]] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, str):
            found.append((path, value))
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{path}.{index}")

    data = node.model_dump(mode="json", by_alias=True, exclude_none=True)
    walk(data.get("parameters", {}), "parameters")
    if "input" in data and isinstance(data["input"], str):
        found.append(("input", data["input"]))
    return found


def _check_acyclic(definition: AgentDefinition) -> None:
    # Until conditional transitions land, a cycle of `next` links could never exit.
    for start in definition.nodes:
        seen = {start}
        current = start
        while (following := definition.nodes[current].next) is not None:
            if following in seen:
                raise ValueError(f"@nodes.{current}.next: {following!r} closes a cycle with no exit")
            seen.add(following)
            current = following


def parse_definition(data: Any, *, source: str | None = None) -> AgentDefinition:
    """Validate already-parsed YAML/JSON into a definition, or raise one DefinitionError."""
    from pydantic import ValidationError

    if not isinstance(data, dict):
        raise DefinitionError(
            "", f"a definition is a mapping with agent, start and nodes, not {type(data).__name__}", source=source
        )
    try:
        return AgentDefinition.model_validate(data)
    except ValidationError as err:
        raise _first_error(err, source) from None


def _first_error(err: Any, source: str | None) -> DefinitionError:
    errors = err.errors(include_url=False)
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    message = str(first["msg"]).removeprefix("Value error, ")
    if message.startswith("@"):
        field, _, reason = message[1:].partition(": ")
        return DefinitionError(field, reason + more, source=source)
    # Drop the union tag pydantic adds to the path (nodes.x.send_message.parameters -> nodes.x.parameters).
    loc = [str(part) for part in first["loc"] if part not in ACTION_TYPES]
    if loc and loc[-1] == "[key]":
        return DefinitionError(
            ".".join(loc[:-1]), f"invalid node id {first['input']!r}: {message}{more}", source=source
        )
    field = ".".join(loc)
    if first["type"] == "union_tag_invalid":
        tag = first.get("ctx", {}).get("tag")
        field = f"{field}.actionType" if field else "actionType"
        message = f"unknown action {tag!r} (expected one of: {', '.join(ACTION_TYPES)})"
    elif first["type"] == "union_tag_not_found":
        field = f"{field}.actionType" if field else "actionType"
        message = "is required"
    elif first["type"] == "missing":
        message = "is required"
    elif first["type"] == "extra_forbidden":
        message = "is not a known field"
    return DefinitionError(field, message + more, source=source)
