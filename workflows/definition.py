"""The agent definition: a versioned graph of nodes, loaded from YAML or JSON.

Field names follow the seed (camelCase in files, snake_case in Python). The graph is
checked when the definition is loaded, so a run never starts on a broken one.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workflows.durations import Duration, format_duration
from workflows.errors import DefinitionError, TemplateError
from workflows.templating import placeholders
from workflows.wire import to_camel

NODE_ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"

# The seed's timeout table, per waiting kind: (default, maximum).
WAIT_TIMEOUTS: dict[str, tuple[timedelta, timedelta]] = {
    "response": (timedelta(hours=24), timedelta(days=7)),
}


class _CamelModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, frozen=True, alias_generator=to_camel, serialize_by_alias=True
    )


class RetrySpec(_CamelModel):
    """How a stage is retried on transient errors (Temporal's own retry policy)."""

    max_attempts: int = Field(default=3, ge=1, le=100)
    initial_interval: Duration = timedelta(seconds=1)
    backoff_coefficient: float = Field(default=2.0, ge=1.0, le=10.0)
    maximum_interval: Duration = timedelta(minutes=5)


class SendMessageParams(_CamelModel):
    message: str = Field(min_length=1, max_length=4000)
    to: str | None = Field(default=None, max_length=500)
    channel: str | None = Field(default=None, max_length=100)


class SendMessageNodeAction(_CamelModel):
    """An action run when a wait times out (the seed's ``timeoutActions``)."""

    action_type: Literal["send_message"]
    parameters: SendMessageParams


class WaitForResponseParams(_CamelModel):
    timeout: Duration = WAIT_TIMEOUTS["response"][0]
    on_timeout: Literal["continue", "fail", "retry"] = "continue"
    max_retries: int = Field(default=1, ge=1, le=10, description="waits repeated by onTimeout: retry")
    timeout_actions: list[SendMessageNodeAction] = Field(default_factory=list, max_length=10)
    expected_from: str | None = Field(default=None, max_length=200)
    thread_id: str | int | None = None

    @field_validator("timeout")
    @classmethod
    def _within_maximum(cls, value: timedelta) -> timedelta:
        maximum = WAIT_TIMEOUTS["response"][1]
        if value > maximum:
            raise ValueError(
                f"{format_duration(value)} is above the maximum of {format_duration(maximum)} for a response wait"
            )
        return value


class _Node(_CamelModel):
    next: str | None = None
    description: str | None = Field(default=None, max_length=500)


class SendMessageNode(_Node):
    action_type: Literal["send_message"]
    parameters: SendMessageParams


class WaitForResponseNode(_Node):
    action_type: Literal["wait_for_response"]
    parameters: WaitForResponseParams = Field(default_factory=WaitForResponseParams)


class RunAgentNode(_Node):
    """A DSMO stage: a registered pure processor, artifact in -> artifact out + summary."""

    action_type: Literal["run_agent"]
    agent: str = Field(min_length=1, max_length=100)
    agent_version: str | None = Field(default=None, max_length=50)
    input: str | None = Field(default=None, max_length=2000, description="template of the input artifact URI")
    timeout: Duration = timedelta(minutes=5)
    retry: RetrySpec = Field(default_factory=RetrySpec)


Node = Annotated[SendMessageNode | WaitForResponseNode | RunAgentNode, Field(discriminator="action_type")]
ACTION_TYPES = ("send_message", "wait_for_response", "run_agent")


class AgentDefinition(_CamelModel):
    agent: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    version: str = Field(default="1.0.0", min_length=1, max_length=50)
    description: str | None = Field(default=None, max_length=2000)
    start: str
    nodes: dict[Annotated[str, Field(pattern=NODE_ID_PATTERN)], Node] = Field(min_length=1, max_length=500)

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
    found: list[tuple[str, str]] = []
    if isinstance(node, SendMessageNode):
        found.append(("parameters.message", node.parameters.message))
        if node.parameters.to:
            found.append(("parameters.to", node.parameters.to))
    elif isinstance(node, RunAgentNode) and node.input:
        found.append(("input", node.input))
    elif isinstance(node, WaitForResponseNode):
        for index, action in enumerate(node.parameters.timeout_actions):
            found.append((f"parameters.timeoutActions.{index}.parameters.message", action.parameters.message))
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
