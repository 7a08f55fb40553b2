"""The agent both contenders run: the support agent of docs/tools.md, its order lookups, and the
stub model's script (``turns`` lookups, then the answer).

The definition is read from the guide itself, as the tool-loop tests read it, so the bench
measures the agent the documentation shows; only ``maxTurns`` is raised to let the model make
every lookup. LangGraph's side takes its prompts and tools from the same definition, so both
send the model the same requests.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, cast

import yaml

from bench.llm_server import Reply
from bench.paths import REPO
from dsmo.workflows.common.templating import render
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from dsmo.workflows.definition.node_types import LlmNode

GUIDE = REPO / "docs" / "tools.md"
TICKET = {"ticket": {"text": "My parcel arrived broken, I want my money back", "order": "A-1"}}
ORDER = {"order": "A-1", "total": 42.5, "status": "delivered"}
ANSWER = {"reply": "done"}
WARM_UP_TURNS = 1  # the unmeasured run before each contender's measured one


def support(turns: int) -> AgentDefinition:
    """The guide's support agent, allowed ``turns`` tool turns and then its answer.

    Args:
        turns: the answers that call a tool (at most 49: `maxTurns` is at most 50).

    Returns:
        The parsed definition, named ``bench-tools``.
    """
    text = GUIDE.read_text()
    definition = cast(dict[str, Any], yaml.safe_load(text.split("```yaml\n", 1)[1].split("```", 1)[0]))
    definition["agent"] = "bench-tools"
    definition["nodes"]["think"]["maxTurns"] = turns + 1  # the lookups, then the answer
    return parse_definition(definition)


def _think(definition: AgentDefinition) -> LlmNode:
    think = definition.nodes["think"]
    assert isinstance(think, LlmNode)
    return think


def offered_tools(definition: AgentDefinition) -> list[dict[str, Any]]:
    """The ``think`` node's tools as a chat-completions request offers them (what DSMO sends)."""
    return [tool.offered() for tool in _think(definition).tools or []]


def first_messages(definition: AgentDefinition) -> list[dict[str, Any]]:
    """The system and user messages of the first turn, rendered from the ticket as DSMO renders them."""
    think = _think(definition)
    system = render(think.system, TICKET) if think.system else None
    prompt = render(think.prompt or "", TICKET)
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]


def script(turns: int) -> list[dict[str, Any]]:
    """The stub model's replies for one run, as `ChatServer`'s ``/script`` takes them: ``turns``
    answers that each look the order up, then the final answer."""
    lookups = [Reply(tool_calls=[("lookup_order", {"order": TICKET["ticket"]["order"]})]) for _ in range(turns)]
    return [asdict(reply) for reply in [*lookups, Reply(content=json.dumps(ANSWER))]]


class Orders:
    """The tools' order service, shared by both contenders: it counts the lookups each run made."""

    def __init__(self) -> None:
        self.lookups = 0

    def lookup(self, data: dict[str, Any], ctx: Any = None) -> dict[str, Any]:
        """``lookup-order``: the order's status and total (DSMO passes an `ActionContext`)."""
        self.lookups += 1
        return {**ORDER, "order": data["order"]}

    def refund(self, data: dict[str, Any], ctx: Any = None) -> dict[str, Any]:
        """``refund-order``: offered by the guide's agent, never called by the script."""
        return {"refunded": data["amount"], "order": data["order"]}
