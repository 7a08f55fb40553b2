"""Which stages run as Temporal local activities, by the definition.

A local activity runs inside the workflow's own task on the worker that holds the run: no
schedule, start and completion round trips through the server, one marker in the history
instead of three events, and no task queue in between. What it gives up: a worker that dies
mid-attempt loses that attempt, and the run's next worker runs it again once the workflow task
times out (a stage's saved output makes the second run reuse the first's work); it cannot
heartbeat, so a model call (an `llm` node) always stays a regular activity; and while it runs
the run takes signals and updates only when the SDK heartbeats the workflow task (every 8 s of
its 10 s timeout), so long stages stay regular too.

The default (``auto``) is local for `run_agent` stages whose timeout is at most
`SHORT_STAGE` (Temporal's workflow task timeout), regular for the rest.
"""

from __future__ import annotations

from datetime import timedelta

from dsmo.workflows.definition.model import AgentDefinition, Node
from dsmo.workflows.definition.node_types import RunAgentNode

SHORT_STAGE = timedelta(seconds=10)


def runs_locally(definition: AgentDefinition, node: Node) -> bool:
    """Whether ``node``'s attempts run as local activities.

    Args:
        definition: The run's definition (its ``localStages``).
        node: The stage.

    Returns:
        True for a `run_agent` node whose ``local``, or else the definition's ``localStages``,
        asks for it; under ``auto``, for one whose timeout is at most `SHORT_STAGE`.
    """
    if not isinstance(node, RunAgentNode):
        return False
    if node.local is not None:
        return node.local
    if definition.local_stages in ("always", "never"):
        return definition.local_stages == "always"
    return node.timeout <= SHORT_STAGE


def chosen_by_default(definition: AgentDefinition, node: Node) -> bool:
    """Whether `runs_locally` followed the ``auto`` default rather than the author's choice.

    Runs started before local stages existed had the same default make their short stages
    regular activities; the workflow asks `workflow.patched` before it follows the default.

    Args:
        definition: The run's definition.
        node: The stage.

    Returns:
        True when neither the node nor the definition says.
    """
    explicit = isinstance(node, RunAgentNode) and node.local is not None
    return not explicit and definition.local_stages in (None, "auto")
