"""The checks a tool-using `llm` node's tools need the rest of the graph for: the nodes they are
bound to, and the conditions (approvals, `allowedTools`) that read the run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsmo.workflows.definition.conditions import ConditionError, check_condition
from dsmo.workflows.definition.node_types import LlmNode


def check_tools_in_graph(
    nodes: Mapping[str, Any],
    node_id: str,
    node: LlmNode,
    *,
    inputs: Sequence[str],
    stages: Sequence[str],
    config_keys: Sequence[str],
    admitting: bool,
) -> None:
    """What a tool-using node's tools ask of the graph: a tool's ``node`` is a node of it (not an
    `llm` one); a tool's approval condition reads the call's arguments (``args``) and the run, as a
    transition's; ``allowedTools`` names the node's tools, each with a condition over the run.

    Raises:
        ValueError: The first problem, naming the field (``@nodes.<node>.tools.<n>.node``, ...).
    """
    conditions = [
        (f"tools.{index}.approval", tool.approval, ["args"])
        for index, tool in enumerate(node.tools or [])
        if tool.approval is not None and tool.approval != "required"
    ]
    names = {tool.name for tool in node.tools or []}
    for index, tool in enumerate(node.tools or []):
        target = nodes.get(tool.node) if tool.node is not None else None
        if tool.node is not None and (target is None or target.action_type == "llm"):
            why = "is an llm node; a tool's node asks no model" if target is not None else "is not a node of the graph"
            raise ValueError(f"@nodes.{node_id}.tools.{index}.node: {tool.node!r} {why}")
    for name, condition in (node.allowed_tools or {}).items():
        if name not in names:
            known = ", ".join(sorted(names))
            raise ValueError(f"@nodes.{node_id}.allowedTools.{name}: not a tool of the node ({known})")
        conditions.append((f"allowedTools.{name}", condition, []))
    for where, condition, extra in conditions:
        try:
            check_condition(
                condition,
                inputs=[*inputs, *extra],
                stages=stages,
                config_keys=config_keys,
                check_functions=admitting,
            )
        except ConditionError as err:
            raise ValueError(f"@nodes.{node_id}.{where}: {err}") from None
