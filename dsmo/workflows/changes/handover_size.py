"""What a move hands over to the run's next generation must fit in one of Temporal's payloads
(2 MB): a hand-over that does not fit would fail every workflow task of the run. It is measured
before the move is accepted, and refused with its size.
"""

from __future__ import annotations

from dsmo.workflows.contracts.migration_io import HANDOVER_LIMIT, HANDOVER_TOO_LARGE
from dsmo.workflows.definition.migration_checks import RunPosition
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.run.context import Run


def handover_problem(run: Run, target: AgentDefinition, position: RunPosition) -> str | None:
    """Why moving ``run`` to ``target`` at ``position`` cannot be handed over (None: it fits)."""
    carried = run.to_checkpoint(position.node, None).model_copy(update={"variables": position.variables})
    handed = run.request.model_copy(update={"definition": target, "checkpoint": carried})
    size = len(handed.model_dump_json())
    return HANDOVER_TOO_LARGE.format(size=size, limit=HANDOVER_LIMIT) if size > HANDOVER_LIMIT else None
