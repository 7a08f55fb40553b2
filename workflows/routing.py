"""Transitions: the orchestrator alone picks the next node, from CEL conditions over small facts."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.conditions import ConditionCostExceeded, ConditionError, evaluate_condition
    from workflows.control import RouteTo, RunEnded
    from workflows.definition import AgentDefinition
    from workflows.run_state import RunState
    from workflows.status import RunStatus


# workflow.patched id: conditions are evaluated under the cost bound (workflows/condition_cost.py).
CONDITION_COST_PATCH = "condition-cost-bound"


def bounded_condition(expression: str, activation: dict[str, Any]) -> bool:
    """Evaluate under the cost bound: above it, ConditionCostExceeded (a contract violation).

    A run that evaluated such a condition before the bound existed replays as it ran: the
    patch marker is written only when the bound refuses, so other runs' histories do not change.
    """
    try:
        return evaluate_condition(expression, activation)
    except ConditionCostExceeded:
        if workflow.patched(CONDITION_COST_PATCH):
            raise
        return evaluate_condition(expression, activation, bounded=False)


class Routing:
    """Mixed into AgentExecution: evaluate a node's transitions; route contract violations."""

    _state: RunState
    _definition: AgentDefinition
    _correlation_id: str
    _routed_to_fail_safe: bool

    def _activation(self) -> dict[str, Any]:
        state = self._state
        return {
            **state.variables,
            "stages": state.variables.get("stages", {}),
            "run": {
                "id": state.run_id,
                "agent": state.agent,
                "workflowVersion": state.workflow_version,
                "correlationId": self._correlation_id,
                "path": list(state.path),
            },
            "config": self._definition.config,
        }

    def _next_node(self, node_id: str, node: Any) -> str | None:
        """The first transition whose condition holds (declared order), the default, or fail-safe."""
        if not node.transitions:
            return node.next  # type: ignore[no-any-return]
        activation = self._activation()
        for index, transition in enumerate(node.transitions):
            if transition.when is not None:
                try:
                    taken = bounded_condition(transition.when, activation)
                except ConditionError as err:
                    self._contract_violation(node_id, f"transition {index} of {node_id}: {err}")
                if not taken:
                    continue
            self._state.audit.record(
                "TRANSITION",
                at=workflow.now(),
                stage=node_id,
                data={"to": transition.to, "transition": index, "when": transition.when or "default"},
            )
            return transition.to  # type: ignore[no-any-return]
        self._contract_violation(node_id, f"no transition of {node_id} matched and it has no default")
        return None  # unreachable: _contract_violation always raises

    def _contract_violation(self, node_id: str, reason: str) -> None:
        """Record it, then go to the fail-safe node (once) or fail the run."""
        fail_safe = self._definition.fail_safe
        route = fail_safe if fail_safe is not None and not self._routed_to_fail_safe else None
        self._state.audit.record(
            "CONTRACT_VIOLATION",
            at=workflow.now(),
            stage=node_id,
            data={"reason": reason, "routedTo": route or "FAILED"},
        )
        if route is not None:
            self._routed_to_fail_safe = True
            raise RouteTo(route, reason)
        raise RunEnded(RunStatus.FAILED, node_id, f"contract violation: {reason}")
