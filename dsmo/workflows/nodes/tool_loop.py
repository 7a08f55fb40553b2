"""The `llm` node, with tools: the model proposes calls, the run decides, makes them and asks again.

Each model turn is a visit of the node's stage (``node``, ``node.v2``, ...), recorded, retried
and replayed like any stage visit. An answer that calls tools commits as that turn's output;
the run then makes the calls the model may make (the node's tools, arguments that match their
schemas: the stage checked them) at once, each as its own `run_tool` activity with an
idempotency key per call, records each in the trail (`TOOL_CALLED`, or `TOOL_REFUSED` for a call
the stage refused), and starts the next turn with the conversation so far, by reference. The
first answer without a call is the node's output, and its transitions route on it as for any
`llm` node. An answer still calling tools at `maxTurns` is a contract violation: the graph, not
the model, bounds the loop. An answer that broke the schema until a spent budget stopped its
repairs is no output: the run routes the budget as before any turn.

A replay makes no tool call: each call's result is read from the original's record of the same
visit and call (`run_tool` reads it), so the replay asks the model nothing and acts on nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import RetryState

from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.run_records import WaitCheckpoint
from dsmo.workflows.contracts.tool_io import (
    RUN_TOOL,
    TOOL_TURN,
    PendingCalls,
    ToolLoop,
    ToolResult,
    ToolResultRef,
    ToolTask,
    ToolTurn,
)
from dsmo.workflows.definition.conditions import ConditionError, ConditionScope
from dsmo.workflows.definition.node_types import LlmNode
from dsmo.workflows.definition.tools import UNSPENT, ToolSpec, add_spend
from dsmo.workflows.nodes.budgets import repairs_stopped, within_limits
from dsmo.workflows.nodes.model_calls import TurnInput
from dsmo.workflows.nodes.stages import run_agent_node, stage_visit
from dsmo.workflows.nodes.tool_approvals import decide_calls
from dsmo.workflows.nodes.tool_nodes import run_tool_node
from dsmo.workflows.run.activity_calls import LIVENESS_TIMEOUT, ActivityFailed, action_retry, call
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import RunEnded
from dsmo.workflows.run.routing import activation, contract_violation


async def llm_node(run: Run, node_id: str, node: LlmNode, resume: WaitCheckpoint | None) -> None:
    """The `llm` node: one answer, or, with tools, turns until an answer that calls none."""
    if not node.tools:
        await run_agent_node(run, node_id, node, resume)
        return
    # A visit continued as new while it waited (for an approval, a budget) picks up where it was.
    waiting = resume if resume is not None and resume.tool_loop is not None else None
    loop = waiting.tool_loop if waiting is not None and waiting.tool_loop is not None else None
    if loop is None:
        loop = ToolLoop(usage=dict(UNSPENT), started_at=workflow.now())
        if node_id in run.state.variables.get("stages", {}):
            _show(run, node_id, loop)  # a visit again: `allowedTools` reads this visit's calls, not the last's
    budget_wait = waiting if waiting is not None and waiting.kind == "budget" else None
    approval_wait = waiting if waiting is not None and waiting.kind == "approval" else None
    while True:
        if loop.pending is None:
            await within_limits(run, node_id, node, loop, budget_wait)
            budget_wait = None
            if loop.turn >= node.max_turns:  # a person raised the budget that stopped the last turn's repairs
                contract_violation(
                    run,
                    node_id,
                    f"stage {node_id} (llm): its answer at its last turn did not match outputSchema "
                    f"(maxTurns {loop.turn})",
                )
            loop.turn += 1
            turn = TurnInput(
                conversation=list(loop.conversation),
                offered=_offered(run, node),
                usage=dict(loop.usage),
                raised=dict(loop.budget_raised),
            )
            task, summary = await stage_visit(run, node_id, node, turn=turn)
            add_spend(loop.usage, summary.inference)
            _show(run, node_id, loop)
            if repairs_stopped(summary.inference):
                # The answer broke the schema and a spent budget stopped its repairs: the checks
                # before the next turn find it spent, and route it (or a person raises it).
                continue
            # A turn that called tools says so where the model cannot write: the stage's own
            # inference (an answer's summary fields are the model's, and could read like a turn's).
            called = isinstance(summary.inference.get("toolCalls"), int) and summary.summary.get("turn") == TOOL_TURN
            calls = summary.summary.get("toolCalls") if called else None
            if not isinstance(calls, list):
                return  # the answer: the node's output, routed by its transitions
            if loop.turn == node.max_turns:
                contract_violation(
                    run,
                    node_id,
                    f"stage {node_id} (llm): the model still called tools at its last turn (maxTurns {loop.turn})",
                )
            loop.pending = PendingCalls(
                stage_path=task.stage_path,
                answer_uri=summary.artifact_out_uri,
                recorded_at=_recorded_folder(run, node_id, task) if any(made.get("ok") for made in calls) else None,
                calls=calls,
                reason=summary.summary.get("reason"),
            )
        pending = loop.pending
        if not pending.decisions_done:
            await decide_calls(run, node_id, node, loop, approval_wait)
            pending.decisions_done = True
        approval_wait = None
        await _make_calls(run, node_id, node, loop)
        results = [pending.made[str(index)] for index in range(1, len(pending.calls) + 1)]
        loop.conversation.append(ToolTurn(answer_uri=pending.answer_uri, results=results))
        loop.called += [
            str(made.get("name"))
            for index, made in enumerate(pending.calls, 1)
            if made.get("ok") and getattr(pending.decided.get(str(index)), "decision", None) != "reject"
        ]
        loop.pending = None
        _show(run, node_id, loop)


def _show(run: Run, node_id: str, loop: ToolLoop) -> None:
    """What conditions and templates read of the visit so far (`stages.<node>.usage`, `.turns`,
    `.toolsCalled`), after each turn is committed and after its calls are made."""
    shown = run.state.variables["stages"][node_id]
    shown.update(usage=dict(loop.usage), turns=loop.turn, toolsCalled=list(loop.called))


def _offered(run: Run, node: LlmNode) -> frozenset[str]:
    """The node's tools its `allowedTools` lets the model call this turn (a condition that cannot
    be evaluated offers nothing: the graph does not widen what it cannot judge)."""
    allowed = node.allowed_tools or {}
    scope = ConditionScope(activation(run)) if allowed else None
    offered = set()
    for tool in node.tools or []:
        condition = allowed.get(tool.name)
        try:
            if condition is None or (scope is not None and scope.evaluate(condition)):
                offered.add(tool.name)
        except ConditionError:
            continue
    return frozenset(offered)


async def _make_calls(run: Run, node_id: str, node: LlmNode, loop: ToolLoop) -> None:
    """Make the pending turn's calls not made yet: those an action or an MCP server makes at once,
    then those a node of the graph makes, one after another (a node may wait, and a run waits for
    one thing at a time)."""
    pending = loop.pending
    assert pending is not None
    by_node = {tool.name for tool in node.tools or [] if tool.node is not None}
    todo = [(index, made) for index, made in enumerate(pending.calls, 1) if str(index) not in pending.made]
    at_once = [(index, made) for index, made in todo if not (made.get("ok") and made.get("name") in by_node)]
    # Every call of the turn ends (and is recorded) before a failed one ends the run: none is
    # left running unrecorded behind it.
    outcomes = await asyncio.gather(
        *(_tool_call(run, node_id, node, loop, index, made) for index, made in at_once), return_exceptions=True
    )
    failed = next((outcome for outcome in outcomes if isinstance(outcome, BaseException)), None)
    if failed is not None:
        raise failed
    for (index, _), outcome in zip(at_once, outcomes, strict=True):
        assert isinstance(outcome, ToolResultRef)
        pending.made[str(index)] = outcome
    for index, made in todo:
        if str(index) not in pending.made:
            pending.made[str(index)] = await _tool_call(run, node_id, node, loop, index, made)


async def _tool_call(
    run: Run, node_id: str, node: LlmNode, loop: ToolLoop, index: int, made: dict[str, Any]
) -> ToolResultRef:
    """Make one call of the turn (or record why not); what the next turn reads of it."""
    state, pending = run.state, loop.pending
    assert pending is not None
    call_id, name = str(made.get("id")), str(made.get("name"))
    where = {"tool": name, "callId": call_id, "index": index, "visit": pending.stage_path}
    if not made.get("ok"):
        # The stage refused it (an unknown tool, arguments that break its schema): the refusal,
        # kept in the turn's answer, is what the model reads as the call's result.
        # The trail points at the answer, whose record keeps why and what was asked.
        answer = [pending.answer_uri]
        state.audit.record("TOOL_REFUSED", at=workflow.now(), stage=node_id, artifact_uris=answer, data=where)
        return ToolResultRef(call_id=call_id)
    tool = next(spec for spec in node.tools or [] if spec.name == name)
    decision = pending.decided.get(str(index))
    rejected = decision is not None and decision.decision == "reject"
    output = await run_tool_node(run, node_id, loop, index, made, tool) if tool.node and not rejected else None
    tool_task = ToolTask(
        run_id=state.run_id,
        stage=node_id,
        stage_path=pending.stage_path,
        workflow_version=state.workflow_version,
        index=index,
        call_id=call_id,
        tool=name,
        action=tool.action,
        mcp_server=tool.mcp.server if tool.mcp else None,
        mcp_tool=tool.mcp.tool if tool.mcp else None,
        answer_uri=pending.answer_uri,
        idempotency_key=f"tool:{state.run_id}:{pending.stage_path}:{index}",
        seal=run.seal,
        recorded_at=pending.recorded_at,
        decision=decision,
        output=output,
        node=tool.node,
    )
    try:
        result = await call(
            RUN_TOOL,
            tool_task,
            result_type=ToolResult,
            start_to_close_timeout=node.tool_timeout,
            heartbeat_timeout=LIVENESS_TIMEOUT,  # the call heartbeats: a dead worker is seen in seconds
            retry_policy=action_retry(node.retry),
            summary=f"{node_id}: tool {name}",
        )
    except ActivityFailed as failed:
        # No record of its own (no attempt lived to write one): the event points at the turn's
        # answer, whose record holds the call's arguments, and says how the call failed.
        said = {} if run.seal is not None else {"error": failed.message}  # a sealed run's words stay sealed
        spent = failed.error.retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED and node.retry.max_attempts > 1
        state.audit.record(
            "TOOL_CALLED",
            at=workflow.now(),
            stage=node_id,
            artifact_uris=[pending.answer_uri],
            data={
                **where,
                **_made_by(tool),
                "ok": False,
                "idempotencyKey": tool_task.idempotency_key,
                **({"attempts": node.retry.max_attempts} if spent else {}),
                **said,
            },
        )
        raise RunEnded(RunStatus.FAILED, node_id, f"{node_id}: tool {name} failed: {failed.message}") from None
    state.audit.record(
        "TOOL_CALLED",
        at=workflow.now(),
        stage=node_id,
        artifact_uris=[result.uri],
        data={
            **where,
            **_made_by(tool),
            "ok": result.ok,
            "resultSha256": result.sha256,
            "idempotencyKey": tool_task.idempotency_key,
            # The refusal is in the record; a run about a data subject keeps it there only (sealed).
            **({"error": result.error} if result.error and run.seal is None else {}),
            **({"attempts": result.attempt} if result.attempt > 1 else {}),
            **({"recorded": True} if result.recorded else {}),
            **({"decision": decision.decision} if decision is not None else {}),
        },
    )
    return ToolResultRef(call_id=call_id, uri=result.uri)


def _recorded_folder(run: Run, node_id: str, task: contracts.StageTask) -> str | None:
    """A replay: the original's folder of this turn, whose records answer its calls; else None.

    Raises:
        RunEnded: A replay whose original never made this turn's calls (a replay acts on nothing).
    """
    replay = run.replay
    if replay is None:
        return None
    if task.reuse_uri is not None:  # a turn taken whole from the original (before --from-stage)
        return task.reuse_uri.rsplit("/attempt=", 1)[0] + "/"
    if task.llm is not None and task.llm.recorded_at is not None:
        return task.llm.recorded_at
    recorded = (replay.llm_records or {}).get(task.stage_path)
    if recorded is None:
        raise RunEnded(
            RunStatus.FAILED,
            node_id,
            f"replay diverged: the original made no tool calls at {task.stage_path}, and a replay makes none",
        )
    return recorded.folder


def _made_by(tool: ToolSpec) -> dict[str, str]:
    """What makes a tool's calls, as `TOOL_CALLED` names it: its action, MCP tool or graph node."""
    if tool.action:
        return {"action": tool.action}
    if tool.mcp:
        return {"mcp": f"{tool.mcp.server}/{tool.mcp.tool}"}
    return {"node": tool.node or ""}
