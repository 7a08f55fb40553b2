"""`Run`: everything one execution knows, passed explicitly to the functions that handle its nodes.

`RunState` (state.py) is what the world sees: status, waits, the audit trail, variables.
`Run` adds what the orchestrator needs to go on: the pinned definition and request, counters
and the saga stack, and the cursors a replay uses. `from_request` builds it for a new run or
from a continue-as-new checkpoint; `to_checkpoint` is the inverse.

Longer than most modules: what a run carries across continue-as-new is read in `from_request`
and written in `to_checkpoint`, field for field; kept side by side, neither forgets one.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from temporalio import workflow

from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.migration_io import MigrationRequest
from dsmo.workflows.contracts.replay_plan import (
    RecordedAction,
    RecordedResume,
    ReplayPlan,
    next_of_kind,
    next_recorded,
)
from dsmo.workflows.contracts.rewind_io import NodeEntry, RewindRequest
from dsmo.workflows.contracts.run_records import Checkpoint, Compensation, ExecutionRequest, WaitCheckpoint
from dsmo.workflows.contracts.subject_io import SubjectSeal
from dsmo.workflows.definition.migration_checks import MigrationPlan, RunPosition
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.events.seen_ids import SEEN_IDS_WINDOW, SeenIds
from dsmo.workflows.run.audit import TAIL_BYTES_MAX, AuditTrail
from dsmo.workflows.run.begun_marks import BegunMarks
from dsmo.workflows.run.control import RunEnded
from dsmo.workflows.run.metrics import count_event
from dsmo.workflows.run.state import RunState

# What a checkpoint keeps of lists that grow with every node a run enters: the latest entries.
# `run.path` in a condition sees at most this many; a stage's commit is judged against the
# keys of the latest ones (a stage of an earlier generation cannot report again).
PATH_CARRIED = 1_000
COMMITTED_CARRIED = 1_000


@dataclass(frozen=True)
class PendingMigration:
    """A move the run accepted: what was asked, where it was, and what the checks decided."""

    request: MigrationRequest
    position: RunPosition
    plan: MigrationPlan


@dataclass(frozen=True)
class PendingRewind:
    """A rewind the run accepted: what was asked and where the run was; carried out at the hand-over."""

    request: RewindRequest
    from_node: str | None


@dataclass
class Run:
    """One execution's context: its request, its visible state and the orchestrator's counters."""

    request: ExecutionRequest
    state: RunState
    correlation_id: str
    input_uri: str | None
    # The run input, when small enough to send with stage tasks (the same document as the artifact).
    input_document: dict[str, Any] | None
    step: int = 0  # nodes entered so far: part of idempotency keys and child ids
    slot_held: bool = False  # a concurrency-limit slot to give back at the end
    slot_granted: bool = False
    # Concurrency keys (engine/flow_slots.py): the locks it holds a slot of, and grants not yet taken.
    slots_held: list[str] = field(default_factory=list)
    slots_granted: set[str] = field(default_factory=set)
    slots_wanted: set[str] = field(default_factory=set)  # held slots a run waits for: given back at the end
    slots_refused: dict[str, str] = field(default_factory=dict)  # lock -> why its line has no room for the run
    left_quietly: list[str] = field(default_factory=list)  # slots it ends without giving back (nobody waited)
    slot_asked: str | None = None  # the lock the run waits in line at, if any
    # Whether its keys live in sharded key locks: decided once, when the run first needs them.
    sharded_keys: bool | None = None
    visits: dict[str, int] = field(default_factory=dict)  # node -> times entered (loops)
    # Idempotency keys of committed stages, oldest first.
    committed: dict[str, None] = field(default_factory=dict)
    routed_to_fail_safe: bool = False
    saga: list[Compensation] = field(default_factory=list)
    resumes_replayed: int = 0  # a replay's cursor in the original's resumes
    actions_replayed: int = 0  # ... and in its saga actions
    # Whether this run writes its trail in segments (trail_segments.py); None until it matters.
    trail_segments: bool | None = None
    # Set while the run hands over to its next generation: events are kept, not applied.
    continuing: bool = False
    # A move to another version (engine/run_migration.py): accepted, carried out at the hand-over.
    migration: PendingMigration | None = None
    # A `migrate` update waits for the run's next node boundary (it was inside a stage) ...
    migration_asked: bool = False
    # ... where the loop says where the run is (or, if it ends first, why no boundary came).
    boundary: RunPosition | None = None
    no_boundary: str | None = None
    boundaries_over: str | None = None  # the run is ending: why no boundary comes any more
    # `migrate`/`rewind` handlers still working, and whether their held answers may go out (hand_over.py).
    handlers_busy: int = 0
    handed_over: bool = False
    # Where the run first entered each node of its current line (what a rewind goes back to).
    first_entries: dict[str, NodeEntry] = field(default_factory=dict)
    # A rewind to an earlier node (engine/rewind_point.py): accepted, carried out at the hand-over ...
    rewind: PendingRewind | None = None
    # ... and, in the next generation while it re-executes its record up to that node, the
    # checkpoint it carried in: its counters and saga stack, taken up again once it gets there.
    rewound_from: Checkpoint | None = None
    # Which local attempts of the current workflow task need a begun mark (never carried over).
    begun_marks: BegunMarks = field(default_factory=BegunMarks)
    # Events taken by update: Temporal records one only when the workflow task (`workflow_task`)
    # that took it completes. The last task in which the run acted on one (a wait took it), where
    # no local stage may run (nodes/stages.py), and those kept for a wait ahead, by the task.
    acted_on_update_in: int = -1
    kept_by_update: dict[str, int] = field(default_factory=dict)

    def took_update(self, event_id: str, *, applied: bool) -> None:
        """An event came by update: ``applied`` to the wait in progress, or kept for one ahead."""
        task = workflow_task()
        if applied:
            self.acted_on_update_in = task
            return
        # Only this task's events matter: one kept in an earlier task is on record.
        self.kept_by_update = {kept: at for kept, at in self.kept_by_update.items() if at == task}
        self.kept_by_update[event_id] = task

    def took_kept(self, event_id: str) -> None:
        """A wait took a kept event: the run acts on it now, before its record if it came by update
        in this task."""
        if self.kept_by_update.pop(event_id, None) == workflow_task():
            self.acted_on_update_in = workflow_task()

    @classmethod
    def from_request(cls, request: ExecutionRequest) -> Run:
        """The run a workflow starts with: new, or carried over from ``request.checkpoint``."""
        info = workflow.info()
        definition = request.definition
        version = definition.workflow_version  # a hash of the canonical definition: computed once
        checkpoint = request.checkpoint
        state = RunState(
            run_id=info.workflow_id,
            agent=definition.agent,
            workflow_version=version,
            started_at=checkpoint.started_at if checkpoint else info.start_time,
            variables=dict(checkpoint.variables if checkpoint else request.input),
            audit=AuditTrail(
                info.workflow_id,
                version,
                definition.audit_level,
                on_record=lambda event: count_event(event, replay_of=request.replay.of if request.replay else None),
            ),
        )
        if request.generation:  # started for this code: its status writes merge from the start
            state.writes.merged = True
        started_with = info.typed_search_attributes
        state.identity_unpublished = (
            started_with.get(sa.AGENT_NAME) is None or started_with.get(sa.WORKFLOW_VERSION) is None
        )
        run = cls(
            request=request,
            state=state,
            correlation_id=request.correlation_id or info.workflow_id,
            input_uri=None,
            # The input artifact is written from request.input (by the starter or by the
            # preparation) and a continued run carries the same request: the same document.
            input_document=contracts.inline_input(request.input),
        )
        if checkpoint is not None:
            run.restore(checkpoint)
        return run

    def restore(self, checkpoint: Checkpoint) -> None:
        """Take up where the previous Temporal run of this execution left off."""
        state = self.state
        self.input_uri = checkpoint.input_uri
        self.step = checkpoint.step
        self.slot_held = self.slot_granted = checkpoint.slot_held
        self.slots_held = list(checkpoint.slots)
        self.sharded_keys = checkpoint.sharded_keys
        self.slots_wanted = set(checkpoint.slots_wanted)
        self.visits = dict(checkpoint.visits)
        self.committed = dict.fromkeys(checkpoint.committed)
        self.routed_to_fail_safe = checkpoint.routed_to_fail_safe
        self.saga = [Compensation.model_validate(entry) for entry in checkpoint.saga]
        self.first_entries = dict(checkpoint.first_entries)
        state.audit.restore(checkpoint.trail, checkpoint.audit)
        if checkpoint.trail is not None:
            self.trail_segments = True
        # A checkpoint from before the window listed every id: this generation keeps them all
        # (and room for its own), so it judges duplicates as the code that started it did.
        legacy = checkpoint.seen_event_ids
        window = SEEN_IDS_WINDOW + len(legacy) if legacy else SEEN_IDS_WINDOW
        state.seen_event_ids = SeenIds.restored(checkpoint.seen_ids, legacy, window=window)
        state.inbox = list(checkpoint.inbox)
        state.path = list(checkpoint.path)
        state.config_ref = checkpoint.config_ref
        state.usage = dict(checkpoint.usage)
        state.usage_paid = dict(checkpoint.usage if checkpoint.usage_paid is None else checkpoint.usage_paid)
        state.budget_raised = dict(checkpoint.budget_raised)

    def to_checkpoint(self, node: str | None, wait: WaitCheckpoint | None) -> Checkpoint:
        """What the next Temporal run needs to go on at ``node`` (inside ``wait``, if waiting)."""
        state = self.state
        previous = self.request.checkpoint
        return Checkpoint(
            node=node,
            step=self.step,
            variables=state.variables,
            seen_ids=state.seen_event_ids.packed(),
            audit=state.audit.events,
            trail=state.audit.head if self.trail_segments else None,
            input_uri=self.input_uri,
            wait=wait,
            generation=(previous.generation + 1) if previous else 2,
            slot_held=self.slot_held,
            slots=self.slots_held,
            sharded_keys=self.sharded_keys is not False,
            slots_wanted=sorted(self.slots_wanted & set(self.slots_held)),
            started_at=state.started_at,
            path=state.path[-PATH_CARRIED:],
            visits=self.visits,
            committed=list(self.committed)[-COMMITTED_CARRIED:],
            config_ref=state.config_ref,
            routed_to_fail_safe=self.routed_to_fail_safe,
            saga=[entry.model_dump(mode="json") for entry in self.saga],
            inbox=state.inbox,
            first_entries=self.first_entries,
            usage=state.usage,
            usage_paid=state.usage_paid,
            budget_raised=state.budget_raised,
        )

    @property
    def definition(self) -> AgentDefinition:
        return self.request.definition

    @property
    def fingerprint_key(self) -> bytes | None:
        """The key the trail's sensitive fingerprints are keyed with: the subject's, if the run has one."""
        subject = self.request.subject
        return base64.b64decode(subject.hmac_key) if subject is not None else None

    @property
    def seal(self) -> SubjectSeal | None:
        """What the run's activities seal its artifacts with: its subject's wrapped data key, if any."""
        return self.request.subject.seal if self.request.subject is not None else None

    @property
    def replay(self) -> ReplayPlan | None:
        """Set when this run re-executes another from its record (`dsmo replay`)."""
        return self.request.replay

    def continue_as_new_due(self) -> bool:
        """The history is long enough to carry the run into a fresh Temporal run."""
        if self.migration is not None or self.rewind is not None:
            return True  # a move to another version, or back to an earlier node, continues as new
        if self.rewound_from is not None:
            return False  # re-executing its record up to the node it went back to: one generation
        info = workflow.info()
        if self.trail_segments and self.state.audit.fresh_bytes >= TAIL_BYTES_MAX:
            return True  # this generation's trail is large (trail_segments.py)
        return info.is_continue_as_new_suggested() or info.get_current_history_length() >= self.request.history_limit

    def replay_move_due(self, node_id: str | None, *, waiting: bool) -> bool:
        """Replay: the original moved to another version here (at ``node_id``, inside its wait or not)."""
        plan = self.replay
        if plan is None or not plan.moves:
            return False
        move = plan.moves[0]
        return move.node == node_id and move.waiting == waiting and self.resumes_replayed == move.resumes_before

    def message_key(self, node_id: str) -> str:
        """Idempotency key of a message or request sent at this step."""
        state = self.state
        return contracts.idempotency_key(state.run_id, node_id, state.workflow_version, str(self.step))

    def going_back_to(self) -> str | None:
        """The node this run is going back to, from when a rewind is accepted until it is there."""
        if self.rewind is not None:
            return self.rewind.request.to_node
        plan = self.replay
        return plan.live_from if plan is not None and plan.rewinding else None

    def note_entry(self, node_id: str) -> None:
        """Remember where the run stands as it first enters ``node_id`` on its current line."""
        if node_id not in self.first_entries:
            audit = self.state.audit
            next_seq = audit.head.seq + len(audit.events) + 1
            self.first_entries[node_id] = NodeEntry(step=self.step, saga_depth=len(self.saga), seq=next_seq)

    def enter_node(self, node_id: str) -> int:
        """Count one more visit of ``node_id``; returns the visit number (1 on the first)."""
        visit = self.visits[node_id] = self.visits.get(node_id, 0) + 1
        return visit

    def recorded_resume(self, node_id: str, kind: str | None = None) -> RecordedResume:
        """Replay: the original run's next resume at this node (or, what-if, of this wait kind), in order."""
        plan = self.replay
        assert plan is not None
        if plan.by_kind and kind is not None:
            recorded, self.resumes_replayed = next_of_kind(plan.resumes, self.resumes_replayed, kind)
            where = f"in a {kind} wait (at {node_id})"
        else:
            recorded, self.resumes_replayed = next_recorded(plan.resumes, self.resumes_replayed, node_id)
            where = f"at {node_id}"
        if recorded is None:
            raise RunEnded(RunStatus.FAILED, node_id, f"replay diverged: the original run never resumed {where}")
        return recorded

    def recorded_action(self, node_id: str) -> RecordedAction:
        """Replay: the original run's next outcome of the saga action at this node."""
        plan = self.replay
        assert plan is not None
        recorded, self.actions_replayed = next_recorded(plan.actions, self.actions_replayed, node_id)
        if recorded is None:
            raise RunEnded(RunStatus.FAILED, node_id, f"replay diverged: the original run never invoked {node_id}")
        return recorded


def workflow_task() -> int:
    """The current workflow task, named by its history length when it started.

    Every activation of one task sees the same number, on replay too, so it may decide the
    commands the run sends (nodes/stages.py) as well as what a stage asks of its worker
    (run/begun_marks.py).
    """
    return workflow.info().get_current_history_length()
