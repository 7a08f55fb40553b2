"""What a run's model calls spend, summed as they commit, and whether a person's raise of a spent budget holds.

A run's totals (`run.usage` in conditions, the status's ``usage``) grow with every committed
`llm` stage visit: tokens as the endpoint counted them, model calls, and the cost at the worker's
price table. They are a few numbers, carried across continue-as-new. The budgets themselves are
checked before each model call (`nodes/budgets.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsmo.workflows.definition.node_types import LIMITS, Budget
from dsmo.workflows.definition.tools import add_spend
from dsmo.workflows.run.context import Run


def count_model_calls(run: Run, inference: Mapping[str, Any]) -> None:
    """Add one committed `llm` stage visit's spend to the run's (and, unless its answers were read
    from a record, to what the run paid for)."""
    add_spend(run.state.usage, inference)
    if not inference.get("recorded"):
        add_spend(run.state.usage_paid, inference)


def raise_problem(waiting: Mapping[str, Any], decided: Mapping[str, Any]) -> str | None:
    """Why a spent budget's wait (``waiting``: its data) does not take a person's raise: a limit
    the run has already spent (it would stop again at once); else None.
    """
    if decided.get("decision") != "raise":
        return None
    usage, limits = waiting.get("usage") or {}, waiting.get("limits") or {}
    for name in LIMITS:
        value = decided.get(name)
        if value is not None and value <= usage.get(name, 0):
            return f"BUDGET_DECIDED.{name}: {value} is not above what was spent ({usage.get(name, 0)})"
    new = {name: decided[name] for name in LIMITS if decided.get(name) is not None}
    still = Budget.model_validate(limits).raised(new).spent(usage) if limits else None
    return None if still is None else f"BUDGET_DECIDED: still spent ({still}); raise that limit too"
