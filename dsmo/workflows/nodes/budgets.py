"""Budgets, checked before a model is asked: a spent one routes the run, or waits for a person to raise it.

A run's budget (the definition's) is checked before each of its model calls, a tool-using node's
before each turn of a visit but the first. A spent budget asks no model, records `BUDGET_SPENT`
and sends the run to ``onBudget`` (else the fail-safe route). With ``ask``, the run first waits
(``waitingFor: budget``) for a person's `BUDGET_DECIDED`: ``raise`` replaces limits (the run
refuses limits it has already spent) and the run asks its model again; ``stop``, or no decision
in time with ``onTimeout: continue``, routes it as without a wait. Who decided what and why goes
into the trail. The raised limits are a few numbers, carried across continue-as-new (the run's
in its checkpoint, a visit's in its `ToolLoop`). Before each turn of a tool-using visit,
`within_limits` checks the run's budget, the visit's and its ``loopTimeout``. Within a stage, the
activity checks both before each repair of an invalid answer, and stops there once one is spent
(`repairs_stopped`): the visit commits without an answer and the run routes the budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from temporalio import workflow

from dsmo.workflows.common import patches
from dsmo.workflows.common.durations import format_duration
from dsmo.workflows.contracts.llm_call import REPAIRS_STOPPED
from dsmo.workflows.contracts.run_records import WaitCheckpoint
from dsmo.workflows.contracts.tool_io import ToolLoop
from dsmo.workflows.definition.node_types import LIMITS, Budget, LlmNode
from dsmo.workflows.nodes.waits import await_event
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import ContinueAsNewDue, RouteTo
from dsmo.workflows.run.routing import contract_violation

DECIDED = "BUDGET_DECIDED"  # the event a person sends (its data: the `budgetDecision` variable)

# workflow.patched id: before each turn the run's budget is checked first, then the visit's limits
# (a budget may now wait for a person). Asked only where a run and its node both set limits.
BUDGET_ORDER_PATCH = "run-budget-before-visit-limits"


async def before_model_call(run: Run, node_id: str, resume: WaitCheckpoint | None = None) -> None:
    """The run's own budget, before one of its `llm` stages asks a model.

    ``resume``: the budget wait this node was in when its run continued as new.

    Raises:
        RouteTo, RunEnded: The run has spent its budget and no one raised it (see `check_budget`).
        ContinueAsNewDue: The run continues as new while it waits for a person.
    """
    definition = run.definition
    state = run.state
    waiting = resume if resume is not None and resume.kind == "budget" and resume.data.get("budget") == "run" else None
    await check_budget(
        run, node_id, definition.budget, definition.on_budget, state.usage, state.budget_raised, "run", waiting
    )


async def check_budget(
    run: Run,
    node_id: str,
    budget: Budget | None,
    on_budget: str | None,
    usage: Mapping[str, int | float],
    raised: dict[str, int | float],
    whose: str,
    resume: WaitCheckpoint | None = None,
) -> None:
    """Nothing if ``usage`` is within ``budget`` (with the limits in ``raised``, which a person's
    raise updates); else the trail says so, the run waits for a person if the budget asks one,
    and moves on.

    Raises:
        RouteTo: It is spent, and ``on_budget`` names where to go.
        RouteTo, RunEnded: It is spent, and the fail-safe route takes it (or the run fails).
        RunEnded: No one decided in time and the wait's ``onTimeout`` is ``fail``.
        ContinueAsNewDue: The run continues as new while it waits.
    """
    if budget is None:
        return
    while True:
        limits = budget.raised(raised)
        spent = limits.spent(usage)
        if spent is None:
            return
        reason = f"stage {node_id} (llm): {'the run budget: ' if whose == 'run' else ''}{spent}"
        if resume is None:
            run.state.audit.record(
                "BUDGET_SPENT",
                at=workflow.now(),
                stage=node_id,
                data={**usage, "reason": spent, "to": on_budget, "budget": whose},
            )
        if budget.ask is None:
            _go_on(run, node_id, on_budget, reason)
        shown = {"budget": whose, "reason": spent, "usage": dict(usage), "limits": limits_of(limits)}
        taken = await await_event(run, node_id, "budget", budget.ask, shown, resume=resume)
        resume = None
        decided = run.state.variables.get("budgetDecision") if taken == DECIDED else None
        if not isinstance(decided, dict):  # no one decided in time (`onTimeout: continue`)
            _go_on(run, node_id, on_budget, f"{reason}; no one raised it within {format_duration(budget.ask.timeout)}")
        new = {name: decided[name] for name in LIMITS if decided.get(name) is not None}
        _record(run, node_id, whose, decided, new)
        if decided.get("decision") != "raise":
            _go_on(run, node_id, on_budget, f"{reason}; {decided.get('by') or 'a person'} stopped it")
        raised.update(new)


def repairs_stopped(inference: Mapping[str, Any]) -> bool:
    """Whether a committed `llm` visit's answer broke its schema and a spent budget stopped its
    repairs (its stage says so in its own inference, where the model cannot write)."""
    return isinstance(inference.get(REPAIRS_STOPPED), str)


def limits_of(budget: Budget) -> dict[str, int | float]:
    """The budget's limits by the names people use (``tokens``, ``costUsd``, ``modelCalls``)."""
    return {name: getattr(budget, field) for name, field in LIMITS.items() if getattr(budget, field) is not None}


def _go_on(run: Run, node_id: str, on_budget: str | None, reason: str) -> NoReturn:
    if on_budget is not None:
        raise RouteTo(on_budget, reason)
    contract_violation(run, node_id, reason)


def _record(run: Run, node_id: str, whose: str, decided: Mapping[str, Any], limits: dict[str, Any]) -> None:
    sealed = run.seal is not None  # a run about a data subject keeps a person's words out of its trail
    run.state.audit.record(
        "BUDGET_DECIDED",
        at=workflow.now(),
        stage=node_id,
        data={
            "budget": whose,
            "decision": decided.get("decision"),
            "by": decided.get("by"),
            **({"limits": limits} if limits else {}),
            **({"reason": decided["reason"]} if decided.get("reason") and not sealed else {}),
        },
    )


async def within_limits(run: Run, node_id: str, node: LlmNode, loop: ToolLoop, resume: WaitCheckpoint | None) -> None:
    """Before a turn: the run's budget, and after the visit's first turn its own and its
    ``loopTimeout`` (time waiting for a person to raise a budget left out).

    ``resume``: the budget wait the visit was in when its run continued as new.

    Raises:
        RouteTo, RunEnded: A budget is spent and no one raised it, or the time is up.
        ContinueAsNewDue: The run continues as new while it waits; its checkpoint carries ``loop``.
    """
    began = workflow.now()
    mine = resume if resume is not None and resume.data.get("budget") == "node" else None
    try:
        if loop.turn >= 1 and _visit_limits_first(run, node):
            # As runs from before budgets could wait did: the visit's limits, then the run's.
            await check_budget(run, node_id, node.budget, node.on_budget, loop.usage, loop.budget_raised, "node")
            _within_time(run, node_id, node, loop)
            await before_model_call(run, node_id)
            return
        await before_model_call(run, node_id, resume)
        if loop.turn >= 1:
            await check_budget(run, node_id, node.budget, node.on_budget, loop.usage, loop.budget_raised, "node", mine)
    except ContinueAsNewDue as due:
        loop.waited_seconds += (workflow.now() - began).total_seconds()  # this generation's part
        if due.wait is not None:
            due.wait = due.wait.model_copy(update={"tool_loop": loop.model_copy(deep=True)})
        raise
    loop.waited_seconds += (workflow.now() - began).total_seconds()
    if loop.turn >= 1:
        _within_time(run, node_id, node, loop)


def _visit_limits_first(run: Run, node: LlmNode) -> bool:
    """Whether this run checks its visit's limits before its own budget (runs from before the
    order changed, whose route differs only when both are spent at the same turn)."""
    both = run.definition.budget is not None and (node.budget is not None or node.loop_timeout is not None)
    return both and not patches.patched(BUDGET_ORDER_PATCH)


def _within_time(run: Run, node_id: str, node: LlmNode, loop: ToolLoop) -> None:
    """Before a model call: a visit past its ``loopTimeout`` (time waiting for approvals left out)
    asks nothing more and goes to the fail-safe route."""
    if node.loop_timeout is None or loop.started_at is None:
        return
    took = (workflow.now() - loop.started_at).total_seconds() - loop.waited_seconds
    if took >= node.loop_timeout.total_seconds():
        limit = format_duration(node.loop_timeout)
        why = f"stage {node_id} (llm): its turns took {took:.0f}s, past its loopTimeout {limit}"
        contract_violation(run, node_id, why)
