"""One step of a run: enter a node, run its handler (chosen by node type), pick the next node."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow

from dsmo.workflows.common.errors import TemplateError
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import WaitCheckpoint
from dsmo.workflows.nodes.child_runs import trigger_agent_node
from dsmo.workflows.nodes.requests import assign_test_node, request_document_node, request_signature_node
from dsmo.workflows.nodes.send_message import send_message_node
from dsmo.workflows.nodes.stages import run_agent_node
from dsmo.workflows.nodes.tool_loop import llm_node
from dsmo.workflows.nodes.waits import delay_node, wait_for_event_node, wait_for_response_node
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import RouteTo, RunEnded
from dsmo.workflows.run.flow_slots import hand_on_deliveries
from dsmo.workflows.run.intake import drop_unreachable, unreachable
from dsmo.workflows.run.routing import next_node
from dsmo.workflows.saga.compensation_stack import invoke_node

NodeHandler = Callable[[Run, str, Any, WaitCheckpoint | None], Awaitable[None]]

# Every node type of the definition format (nodes.NODE_TYPES) and the function that runs it.
HANDLERS: dict[str, NodeHandler] = {
    "run_agent": run_agent_node,
    "llm": llm_node,
    "send_message": send_message_node,
    "wait_for_response": wait_for_response_node,
    "request_document": request_document_node,
    "request_signature": request_signature_node,
    "assign_test": assign_test_node,
    "wait_for_event": wait_for_event_node,
    "delay": delay_node,
    "trigger_agent": trigger_agent_node,
    "invoke": invoke_node,
}


async def step_from(run: Run, node_id: str, *, resume: WaitCheckpoint | None = None) -> str | None:
    """Run one node and pick the next; a contract violation reroutes to the fail-safe node."""
    try:
        node = await _execute(run, node_id, resume=resume)
        return next_node(run, node_id, node)
    except RouteTo as route:
        workflow.logger.warning("Execution %s routed to %s: %s", run.state.run_id, route.node, route.reason)
        return route.node


async def _execute(run: Run, node_id: str, *, resume: WaitCheckpoint | None) -> Any:
    node = run.definition.nodes[node_id]
    state = run.state
    if resume is None:
        run.step += 1
        state.path.append(node_id)
        run.note_entry(node_id)
    state.current_node = node_id
    stale = unreachable(run, node_id)
    if stale:  # kept events no wait from here on takes expire (delivered ones go on to runs of their own)
        drop_unreachable(run, node_id, stale, await hand_on_deliveries(run, stale))
    workflow.logger.info("Action %d: %s (%s) - starting", run.step, node.action_type, node_id)
    try:
        await HANDLERS[node.action_type](run, node_id, node, resume)
    except TemplateError as err:
        raise RunEnded(RunStatus.FAILED, node_id, f"{node_id}: {err}") from None
    workflow.logger.info("Action %d: %s (%s) - completed", run.step, node.action_type, node_id)
    return node
