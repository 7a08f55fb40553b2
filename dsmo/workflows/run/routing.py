"""Transitions: the orchestrator alone picks the next node, from CEL conditions over small facts."""

from __future__ import annotations

from typing import Any, NoReturn

from temporalio import workflow

from dsmo.workflows.common import patches
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.conditions import ConditionCostExceeded, ConditionError, evaluate_condition
from dsmo.workflows.definition.tools import UNSPENT
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import RouteTo, RunEnded

# workflow.patched id: conditions are evaluated under the cost bound (workflows/definition/condition_cost.py).
CONDITION_COST_PATCH = "condition-cost-bound"


def bounded_condition(expression: str, activation: dict[str, Any]) -> bool:
    """Evaluate under the cost bound: above it, ConditionCostExceeded (a contract violation).

    A run that evaluated such a condition before the bound existed replays as it ran: the
    patch marker is written only when the bound refuses, so other runs' histories do not change.
    """
    try:
        return evaluate_condition(expression, activation)
    except ConditionCostExceeded:
        if patches.patched(CONDITION_COST_PATCH):
            raise
        return evaluate_condition(expression, activation, bounded=False)


def activation(run: Run) -> dict[str, Any]:
    """What a transition's condition sees: the variables, `stages`, `run` and `config`."""
    state = run.state
    return {
        **state.variables,
        "stages": state.variables.get("stages", {}),
        "run": {
            "id": state.run_id,
            "agent": state.agent,
            "workflowVersion": state.workflow_version,
            "correlationId": run.correlation_id,
            "path": list(state.path),
            "usage": {**UNSPENT, **state.usage},
        },
        "config": run.definition.config,
    }


def next_node(run: Run, node_id: str, node: Any) -> str | None:
    """The first transition whose condition holds (declared order), the default, or fail-safe."""
    if not node.transitions:
        return node.next  # type: ignore[no-any-return]
    facts = activation(run)
    for index, transition in enumerate(node.transitions):
        if transition.when is not None:
            try:
                taken = bounded_condition(transition.when, facts)
            except ConditionError as err:
                contract_violation(run, node_id, f"transition {index} of {node_id}: {err}")
            if not taken:
                continue
        run.state.audit.record(
            "TRANSITION",
            at=workflow.now(),
            stage=node_id,
            data={"to": transition.to, "transition": index, "when": transition.when or "default"},
        )
        return transition.to  # type: ignore[no-any-return]
    contract_violation(run, node_id, f"no transition of {node_id} matched and it has no default")


def contract_violation(run: Run, node_id: str, reason: str) -> NoReturn:
    """Record it, then go to the fail-safe node (once: raises RouteTo) or fail the run (RunEnded)."""
    fail_safe = run.definition.fail_safe
    route = fail_safe if fail_safe is not None and not run.routed_to_fail_safe else None
    run.state.audit.record(
        "CONTRACT_VIOLATION",
        at=workflow.now(),
        stage=node_id,
        data={"reason": reason, "routedTo": route or "FAILED"},
    )
    if route is not None:
        run.routed_to_fail_safe = True
        raise RouteTo(route, reason)
    raise RunEnded(RunStatus.FAILED, node_id, f"contract violation: {reason}")
