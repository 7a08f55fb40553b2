"""The tools an `llm` node offers its model: each a name, what it does, its arguments' schema,
and what runs it (a plugin action the worker offers, a tool of an MCP server the worker's
settings name, or a node of the graph).

The model only proposes a call; the run decides. A call names one of the node's tools with
arguments that match its schema, or it is refused and the refusal goes back to the model as the
call's result. The run makes the calls of one answer at once, records each, and asks the model
again, at most `maxTurns` times: the graph, not the model, bounds the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Imported here, outside any workflow's sandbox (dsmo passes through): a run checks a person's
# edited arguments against the tool's schema (`arguments_problem`).
import jsonschema
from pydantic import Field, model_validator

from dsmo.workflows.common.schema_patterns import UnsupportedPattern, check_patterns
from dsmo.workflows.common.wire import CamelModel

TOOL_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
EMPTY_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


class McpTool(CamelModel):
    """A tool of an MCP server: the server by the name the worker's settings give it
    (``DSMO_MCP_SERVERS``: its address and headers never come from a definition), and the tool.

    Attributes:
        server: The server's name in the worker's settings.
        tool: The tool's name on that server.
    """

    server: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    tool: str = Field(min_length=1, max_length=128)


class ToolSpec(CamelModel):
    """One tool of an `llm` node.

    Attributes:
        name: What the model calls it (letters, digits, ``_`` and ``-``; unique in the node).
        description: What it does, for the model.
        parameters: The JSON Schema its arguments must match (an object; linear-time patterns only).
        action: The plugin action that runs it (`dsmo.action`), with the call's arguments as its
            input and an idempotency key per call.
        mcp: Or the MCP server's tool that runs it, called with the arguments and the call's
            idempotency key (its ``Idempotency-Key`` header).
        node: Or the node of the graph that runs it (a stage, an `invoke` action, a child run, a
            message or a wait), which reads the call as the ``toolCall`` variable; the loop goes
            on after it, its transitions are not followed.
        approval: ``required``: each call waits for a person to approve, reject or edit it (the
            node's ``approval`` says how long); or a condition over the call's arguments (``args``)
            and the run, as a transition's (``args.amount > 50``): only calls where it holds wait.
    """

    name: str = Field(pattern=TOOL_NAME_PATTERN)
    description: str = Field(min_length=1, max_length=2000)
    parameters: dict[str, Any] = Field(default_factory=lambda: dict(EMPTY_ARGUMENTS))
    action: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    mcp: McpTool | None = None
    node: str | None = Field(default=None, min_length=1, max_length=100)
    approval: str | None = Field(default=None, min_length=1, max_length=2000)

    @model_validator(mode="after")
    def _one_binding(self) -> ToolSpec:
        if sum(binding is not None for binding in (self.action, self.mcp, self.node)) != 1:
            raise ValueError(
                "give one of action (a plugin action), mcp (a server's tool) or node (a node of the graph)"
            )
        return self

    def offered(self) -> dict[str, Any]:
        """The tool as a chat-completions request offers it (``{"type": "function", ...}``)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


# What a run, or a visit of a node, has spent: the totals `usage` carries (`run.usage`,
# `stages.<node>.usage`), all zero before the first model call.
UNSPENT: dict[str, int | float] = {
    "tokens": 0,
    "promptTokens": 0,
    "completionTokens": 0,
    "modelCalls": 0,
    "costUsd": 0.0,
}


def add_spend(usage: dict[str, int | float], inference: Mapping[str, Any]) -> None:
    """Add one stage's model calls, tokens (as the endpoint counted them) and cost to ``usage``."""
    counted = inference.get("usage") if isinstance(inference.get("usage"), dict) else {}
    for name, field in (
        ("tokens", "total_tokens"),
        ("promptTokens", "prompt_tokens"),
        ("completionTokens", "completion_tokens"),
    ):
        value = counted.get(field) if isinstance(counted, dict) else None
        usage[name] = usage.get(name, 0) + (value if isinstance(value, int) and not isinstance(value, bool) else 0)
    calls = inference.get("calls")
    usage["modelCalls"] = usage.get("modelCalls", 0) + (
        calls if isinstance(calls, int) and not isinstance(calls, bool) else 1
    )
    cost = inference.get("costUsd")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        usage["costUsd"] = round(usage.get("costUsd", 0.0) + cost, 8)


def check_json_schema(where: str, schema: dict[str, Any]) -> None:
    """Refuse a schema that does not compile, uses a pattern that is not linear-time, or never ends.

    Only where a definition is admitted (files, publish, the ingress), never inside a workflow.

    Raises:
        ValueError: ``where`` and the reason, naming the place in the schema.
    """
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator_class.check_schema(schema)
        check_patterns(schema)
    except jsonschema.exceptions.SchemaError as err:
        inside = ".".join(str(part) for part in err.absolute_path)
        raise ValueError(f"{where}{'.' + inside if inside else ''}: {err.message}") from None
    except UnsupportedPattern as err:
        raise ValueError(f"{where}.{err}") from None
    try:
        # A schema that refers to itself before it reads anything (`$ref: "#"`) never ends on any
        # document; checking an empty one finds it.
        next(validator_class(schema).iter_errors({}), None)
    except RecursionError:
        raise ValueError(f"{where}: refers to itself without end (a $ref cycle)") from None
    if schema.get("type", "object") != "object":
        raise ValueError(f"{where}.type: it describes a JSON object, so the type is object")


def check_tools(node_id: str, tools: list[ToolSpec]) -> None:
    """The node's tools have distinct names and argument schemas that compile.

    Raises:
        ValueError: The first problem, naming the tool's field.
    """
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        if tool.name in seen:
            raise ValueError(f"@nodes.{node_id}.tools.{index}.name: {tool.name!r} is offered twice")
        seen.add(tool.name)
        check_json_schema(f"@nodes.{node_id}.tools.{index}.parameters", tool.parameters)


def arguments_problem(tool: ToolSpec, arguments: Any) -> str | None:
    """Why ``arguments`` cannot be a call of ``tool`` (not an object, or breaking its schema), or None.

    Pure: a run asks it of a person's edited arguments before it takes the decision.
    """
    if not isinstance(arguments, dict):
        return "must be a JSON object"
    validator_class = jsonschema.validators.validator_for(tool.parameters, default=jsonschema.Draft202012Validator)
    error = jsonschema.exceptions.best_match(validator_class(tool.parameters).iter_errors(arguments))
    if error is None:
        return None
    inside = ".".join(str(part) for part in error.absolute_path)
    return f"{inside + ': ' if inside else ''}{error.message} (the schema of tool {tool.name})"


def decision_problem(
    tools: list[ToolSpec] | None, waiting: Mapping[str, Any], decided: Mapping[str, Any]
) -> str | None:
    """Why the call waiting for approval (``waiting``: its wait's data) does not take a decision:
    another call's id (a stale page), or edited arguments that break the tool's schema; else None.
    """
    tool_name = waiting.get("tool")
    for field in ("call", "callId"):  # the run's name of the call, then the model's
        named, waits = decided.get(field), waiting.get(field)
        if named is not None and named != waits:
            return f"TOOL_DECIDED.{field}: {named!r} is not the call waiting for approval ({waits!r}, {tool_name})"
    if decided.get("decision") != "edit":
        return None
    tool = next((spec for spec in tools or [] if spec.name == tool_name), None)
    if tool is None:
        return None  # a definition without the tool any more (moved): the run refuses the call itself
    problem = arguments_problem(tool, decided.get("arguments"))
    return None if problem is None else f"TOOL_DECIDED.arguments: {problem}"
