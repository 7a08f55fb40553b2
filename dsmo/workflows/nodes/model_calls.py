"""The model call of one `llm` stage visit: what the activity is asked (prompts, model, tools, the
conversation so far), and, in a replay, where the original's recorded answers are."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.common.templating import placeholders
from dsmo.workflows.contracts.llm_call import LlmCall, SpendLimit
from dsmo.workflows.contracts.tool_io import ToolTurn
from dsmo.workflows.definition.node_types import LlmNode
from dsmo.workflows.run.context import Run
from dsmo.workflows.run.control import RunEnded


@dataclass(frozen=True)
class TurnInput:
    """What one turn of a tool-using node is asked with besides the node's prompts.

    Attributes:
        conversation: The earlier turns that called tools, by reference.
        offered: The names of the tools offered this turn (the node's, narrowed by `allowedTools`).
        usage: What the visit has spent before this turn.
        raised: The limits a person raised of the visit's budget.
    """

    conversation: list[ToolTurn] = field(default_factory=list)
    offered: frozenset[str] = frozenset()
    usage: Mapping[str, int | float] = field(default_factory=dict)
    raised: Mapping[str, int | float] = field(default_factory=dict)


def model_call(run: Run, node_id: str, node: LlmNode, stage_path: str, visit: int, turn: TurnInput | None) -> LlmCall:
    """The node's call; the templates are rendered by the activity, which has the input document.

    Raises:
        RunEnded: A replay whose record holds no model calls for this visit (and no reused output).
    """
    roots = {
        path.split(".", 1)[0].split("[", 1)[0]
        for template in (node.prompt, node.system or "")
        for path in placeholders(template)
    }
    variables = run.state.variables
    replay = run.replay
    # A replay never calls a model unless asked to: the original's recorded responses answer,
    # those of the attempt that visit committed, wherever (version, run) it wrote them.
    recorded_from = replay.of if replay is not None and not replay.rerun_llm else None
    recorded_at, recorded_attempt = None, None
    if recorded_from is not None and replay is not None and replay.llm_records is not None:
        recorded = replay.llm_records.get(stage_path)
        if recorded is None and stage_path not in replay.reuse:
            raise RunEnded(
                RunStatus.FAILED,
                node_id,
                f"llm replay: the original run has no recorded model calls for {node_id} (visit {visit}): the "
                "stage is new or changed in the version replayed, or the original never visited it this often, "
                "so the original never asked the model this; replay with --rerun-llm to call the model",
            )
        recorded_at = recorded.folder if recorded is not None else None
        recorded_attempt = recorded.committed if recorded is not None else None
    # A turn offers the tools the graph allows now; with none allowed, a call is refused.
    offered = [tool.offered() for tool in node.tools or [] if turn is None or tool.name in turn.offered]
    return LlmCall(
        prompt=node.prompt,
        system=node.system,
        model=node.model,
        temperature=node.temperature,
        max_tokens=node.max_tokens,
        output_schema=node.output_schema,
        summary_fields=node.summary,
        retries=node.retries,
        variables={root: variables[root] for root in sorted(roots - {"input"}) if root in variables},
        recorded_from=recorded_from,
        recorded_at=recorded_at,
        recorded_attempt=recorded_attempt,
        tools=offered if node.tools else None,
        max_tool_calls=node.max_tool_calls,
        shown_calls=[tool.name for tool in node.tools or [] if tool.approval is not None or tool.node is not None],
        conversation=turn.conversation if turn is not None else [],
        stream=node.stream,
        approval_conditions={
            tool.name: tool.approval
            for tool in node.tools or []
            if tool.approval is not None and tool.approval != "required" and tool.node is None
        },
        budgets=_budgets(run, node, turn),
    )


def _budgets(run: Run, node: LlmNode, turn: TurnInput | None) -> list[SpendLimit]:
    """The budgets the visit's repair calls are made within: the run's, and a tool-using visit's
    own (each of its repair calls comes after the visit's first call)."""
    budgets = []
    own = run.definition.budget
    if own is not None:
        limits = own.raised(run.state.budget_raised).model_copy(update={"ask": None})
        budgets.append(SpendLimit(budget=limits, spent=dict(run.state.usage)))
    if node.budget is not None and turn is not None:
        limits = node.budget.raised(turn.raised).model_copy(update={"ask": None})
        budgets.append(SpendLimit(budget=limits, spent=dict(turn.usage)))
    return budgets
