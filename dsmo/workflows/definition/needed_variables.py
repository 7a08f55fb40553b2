"""Which variables the nodes ahead of a point in a graph need and nothing ahead will set.

A run that moves to another version, or goes back to an earlier node, continues with the
variables it has. The templates and conditions of the nodes it may still enter read some of
them; if one of those is neither in the run's variables nor set by a node ahead, the run
would fail there, days later. This module finds such variables from the graph alone.

What counts as set ahead, conservatively in the run's favour (a node ahead may run after the
one that reads it, so a variable may still be missing on some path):
- ``stages.X`` by the stage node ``X``, ``steps.X`` by the invoke node ``X``, if ahead;
- the resume events' variables (``lastResponse``, ``documentUrls``, ...) by any wait ahead;
- any variable at all by a child run ahead that the run waits for (its variables are copied).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dsmo.workflows.common.errors import TemplateError
from dsmo.workflows.common.templating import required_placeholders
from dsmo.workflows.definition.conditions import BUILTIN_ROOTS, SEED_VARIABLES, ConditionError, condition_references
from dsmo.workflows.definition.model import MATCH_ROOTS, AgentDefinition, node_templates, successors
from dsmo.workflows.definition.node_types import (
    DelayNode,
    ExternalWaitNode,
    InvokeNode,
    LlmNode,
    RunAgentNode,
    TriggerAgentNode,
)


def reachable(definition: AgentDefinition, node_id: str) -> list[str]:
    """The nodes a run at ``node_id`` may still enter, ``node_id`` first."""
    seen: dict[str, None] = {}
    pending = [node_id]
    while pending:
        current = pending.pop()
        if current not in seen:
            seen[current] = None
            pending.extend(successors(definition.nodes[current]))
    return list(seen)


def needed_variables(definition: AgentDefinition, node_id: str, variables: Mapping[str, Any]) -> list[str]:
    """Variables the nodes from ``node_id`` on read, that the run lacks and no node ahead sets.

    Args:
        definition: The graph the run continues on.
        node_id: The node it continues at.
        variables: The run's variables.

    Returns:
        The missing names (``priority``, ``stages.review``), sorted; empty when nothing is missing.
    """
    ahead = [(node, definition.nodes[node]) for node in reachable(definition, node_id)]
    stages_ahead = {name for name, node in ahead if isinstance(node, RunAgentNode | LlmNode)}
    steps_ahead = {name for name, node in ahead if isinstance(node, InvokeNode)}
    waits = any(isinstance(node, ExternalWaitNode | DelayNode | TriggerAgentNode) for _, node in ahead)
    if any(isinstance(node, TriggerAgentNode) and node.parameters.wait_for_completion for _, node in ahead):
        return []  # a child's variables are copied into the run: any name may be set ahead
    have_stages = _names(variables.get("stages"))
    have_steps = _names(variables.get("steps"))
    missing: set[str] = set()

    def need(root: str, member: str | None) -> None:
        if root in ("run", "config", *MATCH_ROOTS):
            return
        if root == "stages":
            if member and member not in have_stages and member not in stages_ahead:
                missing.add(f"stages.{member}")
            return
        if root == "steps":
            if member and member not in have_steps and member not in steps_ahead:
                missing.add(f"steps.{member}")
            return
        if root in variables or (root in SEED_VARIABLES and waits):
            return
        missing.add(root)

    for root, member in _references(node for _, node in ahead):
        need(root, member)
    return sorted(missing)


def variables_read(definition: AgentDefinition, node_id: str) -> set[str]:
    """The variables (top-level names) the templates and conditions from ``node_id`` on read."""
    return {root for root, _ in _references(definition.nodes[node] for node in reachable(definition, node_id))}


def _references(nodes: Iterable[Any]) -> Iterable[tuple[str, str | None]]:
    """(variable, member) for each variable the nodes' templates and conditions read."""
    for node in nodes:
        for path in _template_paths(node):
            root, _, rest = path.partition(".")
            root = root.split("[", 1)[0]
            if isinstance(node, LlmNode) and root == "input":
                continue  # the stage's own input document
            yield root, rest.split(".", 1)[0].split("[", 1)[0] or None
        for expression in _conditions(node):
            try:
                roots, members = condition_references(expression)
            except ConditionError:
                continue  # admitted before today's checks; the run reports it where it is evaluated
            yield from members
            for root in roots - set(BUILTIN_ROOTS):
                yield root, None


def _names(value: Any) -> set[str]:
    return set(value) if isinstance(value, dict) else set()


def _template_paths(node: Any) -> Iterable[str]:
    for _, template in node_templates(node):
        try:
            yield from required_placeholders(template)
        except TemplateError:
            continue  # a malformed template fails where it is rendered, as before


def _conditions(node: Any) -> Iterable[str]:
    for transition in node.transitions:
        if transition.when is not None:
            yield transition.when
    match = getattr(getattr(node, "parameters", None), "match", None)
    if match is not None:
        yield match
