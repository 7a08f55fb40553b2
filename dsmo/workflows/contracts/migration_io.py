"""What crosses the wire when a run moves to another version: the ask, the answer, the record."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dsmo.workflows.common.wire import WireModel
from dsmo.workflows.definition.model import AgentDefinition

# The update a run takes a move through, and the error types its refusals carry.
MIGRATE_UPDATE = "migrate"
# The query a dry run asks: why the run would refuse a move now (its update's checks), or null.
MIGRATE_CHECK_QUERY = "migrate_check"
MIGRATION_REFUSED = "MigrationRefused"
# Not an error to a batch: the run already follows the target version (a re-run finds it there).
ALREADY_ON_TARGET = "MigrationAlreadyOnTarget"
# The most a move hands over to the target version (its definition and the run's state, in JSON
# bytes): a continue-as-new's input, which Temporal caps at 2 MB. A larger move is refused.
HANDOVER_LIMIT = 1_500_000
HANDOVER_TOO_LARGE = (
    "definition: the move would hand over {size:,} bytes (the target with the run's input and state); "
    "a move hands over at most {limit:,}"
)


class MigrationRequest(WireModel):
    """Move a run to another published version of its agent (the `migrate` update's argument).

    Attributes:
        definition: The target version, as published.
        node_map: Node ids of the run's version -> node ids of the target, for nodes that were
            renamed or replaced; a node not named maps to the node with the same id.
        leave_wait: A waiting run whose mapped node is not the same kind of wait leaves its wait
            and runs the mapped node from its beginning (asks again, sends again).
        restart_timers: The wait the run is in starts its timeout afresh on the target node,
            instead of keeping the deadline it had (``waitingUntil``).
        set: Variables to set (or correct) as the run moves, e.g. one the target version reads.
        requested_by: Who asked, recorded in the trail.
        reason: Why, recorded in the trail.
    """

    definition: AgentDefinition
    node_map: dict[str, str] = Field(default_factory=dict)
    leave_wait: bool = False
    restart_timers: bool = False
    set: dict[str, Any] = Field(default_factory=dict)
    requested_by: str = "user"
    reason: str = ""


class MigrationAck(WireModel):
    """What a run answered to a move it accepted: it continues on the target version.

    Attributes:
        run_id: The run.
        from_version: The version it followed (the definition's ``version``).
        to_version: The version it follows now.
        from_workflow_version: The hash of the definition it followed.
        to_workflow_version: The hash of the one it follows now.
        from_node: The node it was at (None: before its first node).
        to_node: The node it goes on at in the target version.
        waiting: It was waiting, and goes on waiting at ``to_node`` (False: it moved between nodes).
        expiring: Ids of kept events no wait of the target version takes; they expire with the move.
    """

    run_id: str
    from_version: str
    to_version: str
    from_workflow_version: str
    to_workflow_version: str
    from_node: str | None
    to_node: str | None
    waiting: bool = False
    expiring: list[str] = Field(default_factory=list)


class MigrationRecord(WireModel):
    """What the next generation of a moved run records as `RUN_MIGRATED` (carried in its checkpoint)."""

    from_version: str
    from_workflow_version: str
    from_node: str | None
    to_node: str | None
    waiting: bool = False  # it moved from inside its wait (else at a node boundary)
    node_map: dict[str, str] = Field(default_factory=dict)
    set: dict[str, Any] = Field(default_factory=dict)  # sensitive values as their fingerprints
    left_wait: bool = False
    restart_timers: bool = False
    requested_by: str = "user"
    reason: str = ""
