"""Tools a node of the graph runs: the model proposes the call, the graph makes it with one of its
own nodes — a stage, an `invoke` action (with its compensation on the saga's stack), a child run,
a message, or a wait for a person or a system.

The node reads the call as the run's ``toolCall`` variable (``{{toolCall.arguments.order}}`` in its
templates), runs as it does anywhere in the graph (recorded, retried, replayed by the same rules),
and its outcome is the call's result: its stage's summary, its action's output, what its wait's
event set. Its own transitions are not followed: the loop goes on. A wait inside such a node that
must continue as new carries the loop along (`ToolLoop`), so the run takes it up at the same call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from temporalio import workflow

from dsmo.workflows.contracts.run_records import WaitCheckpoint
from dsmo.workflows.contracts.tool_io import ToolLoop
from dsmo.workflows.definition.tools import ToolSpec
from dsmo.workflows.nodes.child_runs import trigger_agent_node
from dsmo.workflows.nodes.requests import assign_test_node, request_document_node, request_signature_node
from dsmo.workflows.nodes.send_message import send_message_node
from dsmo.workflows.nodes.stages import run_agent_node
from dsmo.workflows.nodes.waits import delay_node, wait_for_event_node, wait_for_response_node
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import ContinueAsNewDue
from dsmo.workflows.saga.compensation_stack import invoke_node

# The node kinds a tool may be bound to (every kind but `llm`: a tool's node asks no model).
TOOL_NODES: dict[str, Callable[[Run, str, Any, WaitCheckpoint | None], Awaitable[None]]] = {
    "run_agent": run_agent_node,
    "invoke": invoke_node,
    "trigger_agent": trigger_agent_node,
    "send_message": send_message_node,
    "wait_for_response": wait_for_response_node,
    "wait_for_event": wait_for_event_node,
    "request_document": request_document_node,
    "request_signature": request_signature_node,
    "assign_test": assign_test_node,
    "delay": delay_node,
}
# The node kinds that work rather than wait: their time is the loop's own (`loopTimeout`).
_WORKING = frozenset({"run_agent", "invoke", "send_message"})
# Variables a node's outcome is not read from (they are the loop's, or read apart).
_NOT_OUTCOME = frozenset({"stages", "steps", "toolCall", "approval"})


async def run_tool_node(
    run: Run, llm_node_id: str, loop: ToolLoop, index: int, made: dict[str, Any], tool: ToolSpec
) -> dict[str, Any]:
    """Run the node bound to ``tool`` for one call of the pending turn; its outcome.

    Raises:
        ContinueAsNewDue: The node's wait continues as new: at the `llm` node, carrying the loop.
        RunEnded: The node failed the run (a stage that cannot succeed, a wait that fails).
    """
    state, pending = run.state, loop.pending
    assert tool.node is not None and pending is not None
    target = run.definition.nodes[tool.node]
    inside = pending.inside if pending.inside is not None and pending.inside.get("index") == index else None
    resume = WaitCheckpoint.model_validate(inside["wait"]) if inside and inside.get("wait") else None
    if resume is None:
        decided = pending.decided.get(str(index))  # a person's edit replaces the model's arguments
        arguments = made.get("arguments") if decided is None or decided.arguments is None else decided.arguments
        state.variables["toolCall"] = {
            "name": tool.name,
            "callId": str(made.get("id")),
            "arguments": arguments if isinstance(arguments, dict) else {},
            "from": llm_node_id,
        }
        run.step += 1  # the node's messages and requests get keys of their own
    before = dict(state.variables)
    ran_before = {section: (state.variables.get(section) or {}).get(tool.node) for section in ("stages", "steps")}
    state.current_node = tool.node
    began = workflow.now()
    try:
        await TOOL_NODES[target.action_type](run, tool.node, target, resume)
    except ContinueAsNewDue as due:
        loop.waited_seconds += _waited(target.action_type, began)
        pending.inside = {"index": index, "wait": due.wait.model_dump(mode="json") if due.wait else None}
        kind = due.wait.kind if due.wait is not None else "tool"
        carried = WaitCheckpoint(kind=kind, node=llm_node_id, tool_loop=loop.model_copy(deep=True))
        raise ContinueAsNewDue(llm_node_id, carried) from None
    finally:
        state.current_node = llm_node_id
    pending.inside = None
    loop.waited_seconds += _waited(target.action_type, began)
    return _outcome(run, tool.node, before, ran_before)


def _waited(kind: str, began: datetime) -> float:
    """Seconds a node that waits (for a person, a system, a child run, a date) spent since
    ``began``: time `loopTimeout` leaves out, as it does a wait for approval."""
    return 0.0 if kind in _WORKING else (workflow.now() - began).total_seconds()


def _outcome(run: Run, node_id: str, before: dict[str, Any], ran_before: dict[str, Any]) -> dict[str, Any]:
    """What the call's result says of the node's run: its stage's summary and output, its action's
    output, and the variables it set (a reply, a document, a child's result)."""
    variables = run.state.variables
    outcome: dict[str, Any] = {"node": node_id}
    stage = (variables.get("stages") or {}).get(node_id)
    if stage is not None and stage is not ran_before["stages"]:
        outcome["summary"] = stage.get("summary")
        outcome["outputUri"] = stage.get("outputUri")
    step = (variables.get("steps") or {}).get(node_id)
    if step is not None and step is not ran_before["steps"]:
        outcome["output"] = step
    changed = {
        name: value
        for name, value in variables.items()
        if name not in _NOT_OUTCOME and (name not in before or before[name] is not value)
    }
    if changed:
        outcome["set"] = changed
    return outcome
