"""What an `llm` node's stage receives: the templates and settings of one model call."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dsmo.workflows.common.wire import WireModel
from dsmo.workflows.contracts.tool_io import ToolTurn
from dsmo.workflows.definition.node_types import Budget

# The inference field of a visit whose answer broke the schema and whose repairs a spent budget
# stopped (why it is spent): the run routes the budget, and never the answer.
REPAIRS_STOPPED = "budgetSpent"


class SpendLimit(WireModel):
    """A budget a stage's repair calls are made within.

    Attributes:
        budget: Its limits (a person's raises applied).
        spent: What it had spent before the visit's stage began (`UNSPENT`'s names).
    """

    budget: Budget
    spent: dict[str, int | float] = Field(default_factory=dict)


class LlmCall(WireModel):
    """An `llm` node's request, as its stage activity renders and sends it.

    Attributes:
        prompt: The user message template.
        system: The system message template, if any.
        model: A model name or a worker alias; None for the worker's default.
        temperature: Sampling temperature.
        max_tokens: The answer's token cap, if any.
        output_schema: The JSON Schema the answer must match; None for a plain-text answer.
        summary_fields: The answer fields the summary keeps; None for its short scalar fields.
        retries: How many times an invalid answer is sent back with the validation error.
        variables: The run variables the templates name (by root), rendered in the activity
            beside ``input`` (the stage's input document).
        recorded_from: A replay: the run whose recorded responses answer, instead of the model.
        recorded_at: With ``recorded_from``: the original's folder of this visit
            (``s3://.../artifacts/{version}/{run}/{stage}/``, under the version and run that
            wrote it). None: a replay from before visits were recorded, which reads
            ``recorded_from``'s folder under its own version, stage folder and attempt number.
        recorded_attempt: With ``recorded_at``: the attempt the original committed, whose calls
            answer every replay attempt; None (a visit that never committed): each replay
            attempt reads the original's attempt of the same number.
        tools: The tools offered to the model (as a chat-completions request offers them); None
            for a node without tools.
        max_tool_calls: The most tool calls one answer may make (more is a contract violation).
        conversation: The turns before this one that called tools: their answers and results,
            by reference (`ToolTurn`); the request is built from them.
        stream: Ask the endpoint to stream the answer, and write its tokens for the run's live
            stream as they arrive (progress_log.py).
        shown_calls: Tools whose calls may wait for a person's approval, or that a node of the
            graph runs: the summary of an answer calling them carries their arguments and the
            model's words (the run decides, a person sees them, a node reads them as
            ``toolCall``, without reading the store).
        approval_conditions: The conditions of ``shown_calls`` tools whose calls wait only where
            their condition holds, by tool: a call whose condition reads only its arguments and
            does not hold over them waits for no one, and is not shown.
        budgets: The run's budget and a tool-using visit's, as a repair call is checked against
            them: an invalid answer is sent back only while none is spent (`REPAIRS_STOPPED`).
    """

    prompt: str
    system: str | None = None
    model: str | None = None
    temperature: float = 0.0
    max_tokens: int | None = None
    output_schema: dict[str, Any] | None = None
    summary_fields: list[str] | None = None
    retries: int = 1
    variables: dict[str, Any] = Field(default_factory=dict)
    recorded_from: str | None = None
    recorded_at: str | None = None
    recorded_attempt: int | None = None
    tools: list[dict[str, Any]] | None = None
    max_tool_calls: int = 8
    conversation: list[ToolTurn] = Field(default_factory=list)
    shown_calls: list[str] = Field(default_factory=list)
    stream: bool = False
    approval_conditions: dict[str, str] = Field(default_factory=dict)
    budgets: list[SpendLimit] = Field(default_factory=list)
