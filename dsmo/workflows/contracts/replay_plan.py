"""What a replay of a run re-executes from: the original's recorded resumes and saga outcomes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import Field

from dsmo.workflows.common.wire import WireModel
from dsmo.workflows.contracts.migration_io import MigrationRequest


class RecordedResume(WireModel):
    """How a wait of the original run ended, for a replay: the event and the variables it set."""

    node: str
    event_type: str
    set: dict[str, Any] = Field(default_factory=dict)
    kind: str | None = None  # what the wait waited for (response, document, ...), when recorded


class RecordedMove(WireModel):
    """Where the original run moved to another version, for a replay to move there too.

    Attributes:
        node: The node it was at when it moved.
        waiting: It moved from inside its wait at ``node`` (else at the boundary before ``node``).
        resumes_before: How many of the recorded resumes it had taken by then.
        request: The move, as the original took it (sensitive values set by it are fingerprints).
    """

    node: str | None
    waiting: bool
    resumes_before: int
    request: MigrationRequest


class RecordedAction(WireModel):
    """How an `invoke` step of the original run ended, for a replay: its output, or its error."""

    node: str
    output: dict[str, Any] | None = None
    error: str | None = None


class RecordedVisit(WireModel):
    """Where the original run recorded the model calls of one `llm` stage visit, for a replay.

    Attributes:
        folder: The original's folder of that visit (``s3://.../artifacts/{version}/{run}/{stage}/``,
            ``{stage}`` being ``node`` or ``node.vN``), under the version and run that wrote it.
        committed: The attempt whose answer the original committed: the replay reads its calls
            whatever its own attempt number. None when the visit never committed: each replay
            attempt reads the original's attempt of the same number.
    """

    folder: str
    committed: int | None = None

    def attempt_folder(self, attempt: int) -> str:
        """The folder of the original's attempt a replay attempt ``attempt`` reads (ends in ``/``)."""
        return f"{self.folder}attempt={self.committed or attempt}/"


Recorded = TypeVar("Recorded", RecordedResume, RecordedAction)


def next_of_kind(items: Sequence[RecordedResume], position: int, kind: str) -> tuple[RecordedResume | None, int]:
    """The original's next resume of a wait of ``kind`` from ``position`` on, and where to look next."""
    for index in range(position, len(items)):
        if items[index].kind == kind:
            return items[index], index + 1
    return None, len(items)


def next_recorded(items: Sequence[Recorded], position: int, node: str) -> tuple[Recorded | None, int]:
    """The original run's next record at ``node`` from ``position`` on, and where to look next.

    Records of other nodes are passed over (a replay that diverged never takes them back).
    """
    for index in range(position, len(items)):
        if items[index].node == node:
            return items[index], index + 1
    return None, len(items)


class ReplayPlan(WireModel):
    """Re-execute a run: recorded outside events instead of live waits, no messages sent, the
    recorded outcome of each saga action instead of a second execution (no compensation runs
    either), and (from a stage on) earlier stages' committed outputs reused instead of recomputed."""

    of: str
    resumes: list[RecordedResume] = Field(default_factory=list)
    # node -> the original's output URI at its first visit (``node.vN``: at its Nth visit)
    reuse: dict[str, str] = Field(default_factory=dict)
    actions: list[RecordedAction] = Field(default_factory=list)
    rerun_llm: bool = False  # call the models again instead of reading the recorded responses
    # The original's moves to other versions, in order.
    moves: list[RecordedMove] = Field(default_factory=list)
    # A fork: from this node on the run is live (real agents, messages and waits), with these
    # variables set, and (if given) moved to another version there.
    live_from: str | None = None
    corrections: dict[str, Any] = Field(default_factory=dict)
    fork_to: MigrationRequest | None = None
    # A what-if replay against another version: a wait takes the next recorded resume of its
    # kind (its node may be renamed, moved or new), instead of the next one at its node id.
    by_kind: bool = False
    # A rewind: the run re-executes its own record up to ``live_from`` to rebuild its variables,
    # recording nothing, then goes on live there with the counters it carried (rewind_point.py).
    rewinding: bool = False
    # visit (``node``, ``node.vN``) -> where the original recorded that `llm` visit's model calls.
    # None: a plan from before visits were recorded here (its replay reads its own version's
    # folder at its own attempt number); a visit missing from a plan that has it was never
    # asked in the original, so the record cannot answer it.
    llm_records: dict[str, RecordedVisit] | None = None
