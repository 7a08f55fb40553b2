"""What crosses the wire when a run is sent back to an earlier node: the ask, the answer, the record."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dsmo.workflows.common.wire import WireModel
from dsmo.workflows.contracts.replay_plan import ReplayPlan

# The update a run takes a rewind through, and the error type its refusals carry.
REWIND_UPDATE = "rewind"
REWIND_REFUSED = "RewindRefused"


class RewindRequest(WireModel):
    """Send a waiting run back to an earlier node of its path (the `rewind` update's argument).

    Attributes:
        to_node: The node to go back to; the run enters it again with its variables as they
            were when it first entered it (on its current line: a node it went back to before
            counts from that time), plus ``set``.
        set: Variables to correct as the run goes back (sensitive ones are recorded as fingerprints).
        compensate: Undo the saga steps done after ``to_node``, last first, as a failure would.
            False leaves them done (recorded).
        requested_by: Who asked, recorded in the trail.
        reason: Why, recorded in the trail.
        plan: The run's own record up to ``to_node``, which it re-executes without calling an
            agent, a model or a person to rebuild its variables (built by the client from the
            run's trail).
    """

    to_node: str
    set: dict[str, Any] = Field(default_factory=dict)
    compensate: bool = True
    requested_by: str = "user"
    reason: str
    plan: ReplayPlan


class RewindAck(WireModel):
    """What a run answered to a rewind it accepted.

    Attributes:
        run_id: The run.
        from_node: The node it was at (waiting).
        to_node: The node it goes back to.
        compensated: The saga steps undone, in the order they were undone.
        compensation_failed: The saga steps whose undoing failed (each handed to a retry workflow).
        left: The saga steps left done (``compensate`` was False).
    """

    run_id: str
    from_node: str | None
    to_node: str
    compensated: list[str] = Field(default_factory=list)
    compensation_failed: list[str] = Field(default_factory=list)
    left: list[str] = Field(default_factory=list)


class NodeEntry(WireModel):
    """Where a run stood when it first entered a node on its current line: what a rewind goes back to.

    Attributes:
        step: The run's step counter at that entry.
        saga_depth: How many saga steps were on the stack then (the ones above were done after).
        seq: The sequence number of the first trail event from that entry on.
    """

    step: int
    saga_depth: int
    seq: int


class RewindRecord(WireModel):
    """What a rewound run's next generation needs to know: it re-executes its record up to ``to_node``."""

    from_node: str | None
    to_node: str
