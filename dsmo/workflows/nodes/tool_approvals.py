"""Tool calls that wait for a person to approve, edit or reject them.

A tool with ``approval`` makes its calls wait until someone decides each (or the node's
``approval`` timeout does). A condition that reads only the call's arguments is evaluated by the
turn's stage, which carries a call's arguments to the run only if it waits (``waits: false``
otherwise): arguments past what a turn's summary carries do not refuse a call that waits for no one.

The model proposed the call; the run shows it (the tool, the arguments, the model's words) in
the wait's ``waitingData``, takes a `TOOL_DECIDED` event for it, records who decided what and
why in the trail (`TOOL_DECIDED`), and only then makes the calls of the turn. A run that must
continue as new while it waits carries where its visit is (`ToolLoop`) in the wait's checkpoint.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from dsmo.workflows.common.durations import format_duration
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import WaitCheckpoint
from dsmo.workflows.contracts.tool_io import PendingCalls, ToolDecision, ToolLoop
from dsmo.workflows.definition.conditions import ConditionError, ConditionScope
from dsmo.workflows.definition.node_types import LlmNode
from dsmo.workflows.definition.tools import ToolSpec
from dsmo.workflows.nodes.waits import await_event
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import ContinueAsNewDue, RunEnded
from dsmo.workflows.run.routing import activation

DECIDED = "TOOL_DECIDED"  # the event a person sends, and what the trail records of it


async def decide_calls(run: Run, node_id: str, node: LlmNode, loop: ToolLoop, resume: WaitCheckpoint | None) -> None:
    """Wait, one call after another, for a decision on each pending call that needs one.

    ``resume``: the wait this node was in when its run continued as new (its first undecided call's).

    Raises:
        ContinueAsNewDue: The run continues as new inside a wait; its checkpoint carries ``loop``.
        RunEnded: A timeout whose ``onTimeout`` is ``fail``.
    """
    pending = loop.pending
    assert pending is not None
    tools = {tool.name: tool for tool in node.tools or []}
    # Continued as new inside a wait: the calls before it were decided or needed no decision.
    resumed_at = resume.data.get("index", 0) if resume is not None else 0
    for index, made in enumerate(pending.calls, 1):
        tool = tools.get(str(made.get("name")))
        if str(index) in pending.decided or not made.get("ok") or tool is None or tool.approval is None:
            continue
        if index < resumed_at:
            continue
        if made.get("waits") is False:  # its condition reads only its arguments: the stage found it false
            continue
        proposed = made.get("arguments")
        arguments: dict[str, Any] = proposed if isinstance(proposed, dict) else {}
        unclear = True if resume is not None else _unclear(run, tool, arguments)
        if unclear is False:
            continue
        shown: dict[str, Any] = {
            "tool": tool.name,
            "callId": str(made.get("id")),
            "arguments": arguments,
            "visit": pending.stage_path,
            "index": index,
            "call": f"{pending.stage_path}#{index}",  # unique in the run: a decision names it
            **({"reason": pending.reason} if pending.reason else {}),
            **({"conditionError": unclear} if isinstance(unclear, str) else {}),
        }
        began = workflow.now()
        try:
            taken = await await_event(run, node_id, "approval", node.approval, shown, resume=resume)
        except ContinueAsNewDue as due:
            loop.waited_seconds += (workflow.now() - began).total_seconds()  # this generation's part
            if due.wait is not None:
                due.wait = due.wait.model_copy(update={"tool_loop": loop.model_copy(deep=True)})
            raise
        # Waiting for a person is not the loop's own time (`loopTimeout`).
        loop.waited_seconds += (workflow.now() - began).total_seconds()
        resume = None
        decision = _decision(run, node_id, node, taken)
        pending.decided[str(index)] = decision
        _record(run, node_id, pending, index, tool, decision)


def _unclear(run: Run, tool: ToolSpec, arguments: dict[str, Any]) -> bool | str:
    """Whether this call waits: True (``required``, or its condition holds), False, or why the
    condition could not be evaluated (the call then waits: a person decides what the run cannot)."""
    if tool.approval == "required":
        return True
    assert tool.approval is not None
    try:
        return ConditionScope(activation(run)).evaluate(tool.approval, {"args": arguments}) or False
    except ConditionError as err:
        return str(err)


def _decision(run: Run, node_id: str, node: LlmNode, taken: str | None) -> ToolDecision:
    """The decision the wait ended with: the event's (now the run's ``approval`` variable), or a
    rejection because no one decided in time (``onTimeout: continue``)."""
    if taken != DECIDED:
        waited = format_duration(node.approval.timeout)
        return ToolDecision(decision="reject", reason=f"no one decided within {waited}; the call was not made")
    data = run.state.variables.get("approval")
    if not isinstance(data, dict):  # a replay whose record keeps no readable decision
        raise RunEnded(RunStatus.FAILED, node_id, f"replay diverged: {node_id}'s decision is not in the record")
    return ToolDecision.model_validate(
        {name: data[name] for name in ("decision", "arguments", "reason", "by") if data.get(name) is not None}
    )


def _record(run: Run, node_id: str, pending: PendingCalls, index: int, tool: ToolSpec, decision: ToolDecision) -> None:
    made = pending.calls[index - 1]
    sealed = run.seal is not None  # a run about a data subject keeps the person's words in its records
    run.state.audit.record(
        "TOOL_DECIDED",
        at=workflow.now(),
        stage=node_id,
        data={
            "tool": tool.name,
            "callId": str(made.get("id")),
            "index": index,
            "visit": pending.stage_path,
            "decision": decision.decision,
            "by": decision.by,
            **({"reason": decision.reason} if decision.reason and not sealed else {}),
            **({"arguments": decision.arguments} if decision.arguments is not None and not sealed else {}),
        },
    )
