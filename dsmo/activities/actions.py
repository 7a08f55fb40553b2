"""Side-effecting actions (`invoke` nodes) and their compensations, behind one small interface.

An action is a compensable step: `execute(input, ctx) -> output`, `compensate(output, ctx) ->
applied?`, `is_compensatable(output)`. Both calls receive a key (`op:{run}:{node}` /
`comp:{run}:{node}`): an action must apply its effect once per key, so a retried or repeated
call is harmless. Register one with the `action` decorator (a function, and optionally its
compensation) or add an object with those three methods to an `ActionRegistry`.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from temporalio import activity

from dsmo.activities.maybe_async import call_maybe_async
from dsmo.activities.plugin_errors import PluginError, UnknownAction, permanent_errors
from dsmo.workflows.contracts.activity_io import (
    COMPENSATE,
    INVOKE_ACTION,
    ActionResult,
    ActionTask,
    CompensationResult,
    CompensationTask,
)

if TYPE_CHECKING:
    from dsmo.config.settings import Settings


@dataclass(frozen=True)
class ActionContext:
    """What an action is told besides its input.

    Attributes:
        run_id: The run.
        node: The `invoke` node.
        key: The idempotency key: apply the effect once per key.
        attempt: The activity attempt, from 1.
        settings: The worker's settings (where its own systems are configured).
    """

    run_id: str
    node: str
    key: str
    attempt: int
    settings: Settings | None = None


class CompensableAction(Protocol):
    """A side effect with its counter-operation."""

    @property
    def name(self) -> str: ...

    def execute(self, data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]: ...

    def compensate(self, output: dict[str, Any], ctx: ActionContext) -> bool: ...

    def is_compensatable(self, output: dict[str, Any]) -> bool: ...


ActionFn = Callable[[dict[str, Any], ActionContext], Any]


@dataclass(frozen=True)
class FunctionAction:
    """An action made of functions (the `action` decorator's); either may be an ``async def``."""

    name: str
    run: ActionFn
    undo: ActionFn | None = None

    def execute(self, data: dict[str, Any], ctx: ActionContext) -> Any:
        return self.run(data, ctx)

    def compensate(self, output: dict[str, Any], ctx: ActionContext) -> Any:
        if self.undo is None:
            return False
        return self.undo(output, ctx)

    def is_compensatable(self, output: dict[str, Any]) -> bool:
        return self.undo is not None


class ActionRegistry:
    """Actions by name."""

    def __init__(self) -> None:
        self._actions: dict[str, CompensableAction] = {}

    def add(self, action: CompensableAction) -> None:
        """Add ``action``; adding the same one again is harmless.

        Raises:
            PluginError: Another action is registered under its name.
        """
        known = self._actions.get(action.name)
        if known is not None and known is not action and known != action:
            raise PluginError(f"action {action.name} is registered twice")
        self._actions[action.name] = action

    def get(self, name: str) -> CompensableAction:
        """The action ``name``.

        Raises:
            UnknownAction: No action has that name.
        """
        if name not in self._actions:
            known = ", ".join(sorted(self._actions)) or "none"
            raise UnknownAction(f"action {name!r} is not registered on this worker (registered: {known})")
        return self._actions[name]

    def names(self) -> list[str]:
        """Registered action names, sorted."""
        return sorted(self._actions)

    def copy(self) -> ActionRegistry:
        """A new registry with the same actions."""
        duplicate = ActionRegistry()
        duplicate._actions.update(self._actions)
        return duplicate


class ActionActivities:
    """The `invoke_action` and `compensate_action` activities over one registry."""

    def __init__(self, registry: ActionRegistry, executor: Executor, settings: Settings | None = None) -> None:
        self.registry = registry
        self.executor = executor
        self.settings = settings

    @activity.defn(name=INVOKE_ACTION)
    @permanent_errors
    async def invoke_action(self, task: ActionTask) -> ActionResult:
        action = self.registry.get(task.action)
        ctx = ActionContext(task.run_id, task.node, task.idempotency_key, activity.info().attempt, self.settings)
        where = f"run {task.run_id}, step {task.node}"
        output = await call_maybe_async(
            self.executor, action.execute, task.input, ctx, who=("action", task.action, where)
        )
        return ActionResult(output=output, attempt=ctx.attempt)

    @activity.defn(name=COMPENSATE)
    @permanent_errors
    async def compensate_action(self, task: CompensationTask) -> CompensationResult:
        action = self.registry.get(task.action)
        if task.kind == "noop":
            return CompensationResult(applied=False, detail="no-op compensation")
        if not action.is_compensatable(task.output):
            return CompensationResult(applied=False, detail="not compensatable")
        ctx = ActionContext(task.run_id, task.node, task.key, task.attempt, self.settings)
        where = f"run {task.run_id}, compensating {task.node}"
        answer = await call_maybe_async(
            self.executor, action.compensate, task.output, ctx, who=("action", task.action, where)
        )
        applied = True if answer is None else bool(answer)  # a function that returns nothing did it
        return CompensationResult(applied=applied, detail="applied" if applied else "already compensated")
