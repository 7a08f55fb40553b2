"""Side-effecting actions (`invoke` nodes) and their compensations, behind one small interface.

An action is the seed's CompensableAction: `execute(input, ctx) -> output`,
`compensate(output, ctx) -> applied?`, `is_compensatable(output)`. Both calls receive a key
(`op:{run}:{node}` / `comp:{run}:{node}`): an action must apply its effect once per key, so a
retried or repeated call is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from temporalio import activity

from dsmo.activities.errors import UnknownAction, permanent_errors
from dsmo.workflows.contracts import (
    COMPENSATE,
    INVOKE_ACTION,
    ActionResult,
    ActionTask,
    CompensationResult,
    CompensationTask,
)


@dataclass(frozen=True)
class ActionContext:
    run_id: str
    node: str
    key: str
    attempt: int


class CompensableAction(Protocol):
    name: str

    def execute(self, data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]: ...

    def compensate(self, output: dict[str, Any], ctx: ActionContext) -> bool: ...

    def is_compensatable(self, output: dict[str, Any]) -> bool: ...


class ActionRegistry:
    def __init__(self) -> None:
        self._actions: dict[str, CompensableAction] = {}

    def add(self, action: CompensableAction) -> None:
        self._actions[action.name] = action

    def get(self, name: str) -> CompensableAction:
        if name not in self._actions:
            known = ", ".join(sorted(self._actions)) or "none"
            raise UnknownAction(f"action {name!r} is not registered on this worker (registered: {known})")
        return self._actions[name]


class ActionActivities:
    def __init__(self, registry: ActionRegistry) -> None:
        self.registry = registry

    @activity.defn(name=INVOKE_ACTION)
    @permanent_errors
    def invoke_action(self, task: ActionTask) -> ActionResult:
        action = self.registry.get(task.action)
        ctx = ActionContext(task.run_id, task.node, task.idempotency_key, activity.info().attempt)
        return ActionResult(output=action.execute(task.input, ctx))

    @activity.defn(name=COMPENSATE)
    @permanent_errors
    def compensate_action(self, task: CompensationTask) -> CompensationResult:
        action = self.registry.get(task.action)
        if task.kind == "noop":
            return CompensationResult(applied=False, detail="no-op compensation")
        if not action.is_compensatable(task.output):
            return CompensationResult(applied=False, detail="not compensatable")
        applied = action.compensate(task.output, ActionContext(task.run_id, task.node, task.key, task.attempt))
        return CompensationResult(applied=applied, detail="applied" if applied else "already compensated")
