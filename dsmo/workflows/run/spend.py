"""What a run's model calls spend, summed as they commit, and the budgets checked before each call.

A run's totals (`run.usage` in conditions, the status's ``usage``) grow with every committed
`llm` stage visit: tokens as the endpoint counted them, model calls, and the cost at the worker's
price table. They are a few numbers, carried across continue-as-new. A budget (the definition's
for the whole run, a tool-using node's for one visit) is checked before a model is asked: one
that is spent asks nothing more, records `BUDGET_SPENT`, and sends the run to its ``onBudget``
node, or the fail-safe route.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from temporalio import workflow

from dsmo.workflows.definition.tools import Budget, add_spend
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import RouteTo
from dsmo.workflows.run.routing import contract_violation


def count_model_calls(run: Run, inference: Mapping[str, Any]) -> None:
    """Add one committed `llm` stage visit's spend to the run's."""
    add_spend(run.state.usage, inference)


def before_model_call(run: Run, node_id: str) -> None:
    """The run's own budget, before one of its `llm` stages asks a model.

    Raises:
        RouteTo, RunEnded: The run has spent its budget (see `stop_if_spent`).
    """
    definition = run.definition
    stop_if_spent(run, node_id, definition.budget, definition.on_budget, run.state.usage, whose="run")


def stop_if_spent(
    run: Run,
    node_id: str,
    budget: Budget | None,
    on_budget: str | None,
    usage: Mapping[str, int | float],
    *,
    whose: str,
) -> None:
    """Nothing if ``usage`` is within ``budget``; else the trail says so and the run moves on.

    Raises:
        RouteTo: It is spent, and ``on_budget`` names where to go.
        RouteTo, RunEnded: It is spent, and the fail-safe route takes it (or the run fails).
    """
    spent = budget.spent(usage) if budget is not None else None
    if spent is None:
        return
    reason = f"stage {node_id} (llm): {'the run budget: ' if whose == 'run' else ''}{spent}"
    run.state.audit.record(
        "BUDGET_SPENT",
        at=workflow.now(),
        stage=node_id,
        data={**usage, "reason": spent, "to": on_budget, "budget": whose},
    )
    if on_budget is not None:
        raise RouteTo(on_budget, reason)
    contract_violation(run, node_id, reason)
