"""What a tool-using `llm` node's turns and tool calls carry: references, never the conversation.

The conversation lives in the store, write-once: each turn's answer is the turn's stage output
(the assistant message, with its tool calls), and each call's result is its own record beside
it (``.../{node or node.vN}/tools/{n}.json``). Workflow history holds only their addresses.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from dsmo.workflows.common.wire import WireModel
from dsmo.workflows.contracts.subject_io import SubjectSeal

RUN_TOOL = "run_tool"
TOOL_TURN = "tool_calls"  # the stage summary's ``turn`` of an answer that called tools
TOOL_RECORD_KIND = "dsmo.tool-call/v1"


class ToolResultRef(WireModel):
    """One call of a turn, as the next turn reads it back.

    Attributes:
        call_id: The model's id for the call (what its result answers).
        uri: The call's record (its result or its error); None for a call the run refused, whose
            reason is in the turn's answer (``toolCalls[n].problem``).
    """

    call_id: str
    uri: str | None = None


class ToolTurn(WireModel):
    """One turn that called tools: the answer that asked, and each call's result, in order.

    Attributes:
        answer_uri: The turn's committed stage output: the model's message and its tool calls.
        results: One per tool call of that answer, in the answer's order.
    """

    answer_uri: str
    results: list[ToolResultRef] = Field(default_factory=list)


class ToolDecision(WireModel):
    """What a person decided about a call that waited for approval (or its timeout did).

    Attributes:
        decision: ``approve`` (the call as the model made it), ``edit`` (with ``arguments``) or
            ``reject`` (no call: the model reads ``reason`` as its result).
        arguments: The arguments the call is made with instead of the model's (``edit``).
        reason: Why, in the decider's words (what the model reads of a rejection).
        by: Who decided, as the way in named them; None for a timeout.
    """

    decision: Literal["approve", "reject", "edit"]
    arguments: dict[str, Any] | None = None
    reason: str | None = None
    by: str | None = None


class PendingCalls(WireModel):
    """A turn's tool calls the run has not made yet: while some wait for approval.

    Attributes:
        stage_path: The turn's visit.
        answer_uri: The turn's committed answer (where each call's arguments are).
        recorded_at: A replay: the original's folder of the visit, whose records answer.
        calls: The turn's calls as its summary lists them (``id``, ``name``, ``ok``, and the
            ``arguments`` of calls that may wait for approval).
        reason: The model's words beside the calls, as a person deciding sees them.
        decided: Each decision so far, by the call's place in the answer (``"1"``, ...).
        decisions_done: Every call that needed a person's decision has one.
        made: The calls made so far, by their place (kept while a node that runs one waits).
        inside: While the node that runs a call waits: the call's place (``index``) and that
            wait's checkpoint (``wait``), to take it up again in the next Temporal run.
    """

    stage_path: str
    answer_uri: str
    recorded_at: str | None = None
    calls: list[dict[str, Any]] = Field(default_factory=list)
    reason: str | None = None
    decided: dict[str, ToolDecision] = Field(default_factory=dict)
    decisions_done: bool = False
    made: dict[str, ToolResultRef] = Field(default_factory=dict)
    inside: dict[str, Any] | None = None


class ToolLoop(WireModel):
    """Where one visit of a tool-using node is: what a run waiting for an approval or a budget
    carries into its next Temporal run (bounded by the node's ``maxTurns`` and ``maxToolCalls``).

    Attributes:
        turn: The model turns taken.
        started_at: When the visit began (its ``loopTimeout`` counts from then).
        waited_seconds: The time it spent waiting for approvals (which ``loopTimeout`` leaves out).
        usage: What they spent (tokens, model calls, cost).
        conversation: The turns that called tools and were answered.
        called: The tools its calls ran, in order (refused and rejected calls left out).
        pending: The last turn's calls, while they wait for decisions.
        budget_raised: The node budget's limits a person raised for this visit.
    """

    turn: int = 0
    started_at: datetime | None = None
    waited_seconds: float = 0.0
    usage: dict[str, int | float] = Field(default_factory=dict)
    conversation: list[ToolTurn] = Field(default_factory=list)
    called: list[str] = Field(default_factory=list)
    pending: PendingCalls | None = None
    budget_raised: dict[str, int | float] = Field(default_factory=dict)


class ToolTask(WireModel):
    """Run one tool call the model made and the run accepted.

    Attributes:
        run_id: The run.
        stage: The `llm` node.
        stage_path: The turn's visit (``node`` or ``node.vN``): its folder holds the call's record.
        workflow_version: The run's version (the record's folder).
        index: The call's place in the answer (1 for the first): its record is ``tools/{index}.json``.
        call_id: The model's id for the call.
        tool: The tool's name.
        action: The plugin action that runs it (None for an MCP tool).
        mcp_server: The MCP server that runs it, by its name in the worker's settings.
        mcp_tool: The tool's name on that server.
        answer_uri: The turn's answer, where the call's arguments are read.
        idempotency_key: The action applies its effect once per key (``tool:{run}:{visit}:{index}``).
        seal: The run's data subject key: the record is sealed with it.
        recorded_at: A replay: the original's folder of this visit, whose record answers instead
            of the action (no call is made).
        decision: A person's decision on the call (it waited for approval): an edit changes its
            arguments, a rejection makes no call and records the reason as its error.
        output: A node of the graph made the call: its outcome, recorded as the call's result
            (no action is run).
        node: That node.
    """

    run_id: str
    stage: str
    stage_path: str
    workflow_version: str
    index: int
    call_id: str
    tool: str
    action: str | None = None
    mcp_server: str | None = None
    mcp_tool: str | None = None
    answer_uri: str
    idempotency_key: str
    seal: SubjectSeal | None = None
    recorded_at: str | None = None
    decision: ToolDecision | None = None
    output: dict[str, Any] | None = None
    node: str | None = None


class ToolResult(WireModel):
    """What became of one tool call.

    Attributes:
        uri: Its record (the arguments and the result or the error), write-once.
        sha256: The record's digest, for the trail.
        ok: The action returned a result; False when it refused the call (the error goes back to
            the model as the call's result).
        error: The refusal, in one line.
        attempt: Which of Temporal's attempts succeeded (above 1: earlier ones failed or died).
        recorded: The record came from the original run (a replay made no call).
    """

    uri: str
    sha256: str
    ok: bool = True
    error: str | None = None
    attempt: int = 1
    recorded: bool = False
