"""What a run shows the world: its request, status view, terminal record and audit events.

Longer than most modules: these are public types (`from dsmo import ...`), each documented field
by field, and they belong together (the request, what a run answers with, what it records).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from dsmo.workflows.common.patches import REVISION
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.common.wire import WireModel
from dsmo.workflows.contracts.activity_io import PreparedRun
from dsmo.workflows.contracts.migration_io import MigrationRecord
from dsmo.workflows.contracts.replay_plan import ReplayPlan
from dsmo.workflows.contracts.rewind_io import NodeEntry, RewindRecord
from dsmo.workflows.contracts.subject_io import SubjectKey
from dsmo.workflows.contracts.tool_io import ToolLoop
from dsmo.workflows.contracts.trail_io import TrailHead
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.events.inbox import InboxEntry, InboxView

AuditType = Literal[
    "RUN_CREATED",
    "STAGE_ENQUEUED",
    "STAGE_STARTED",
    "STAGE_SUCCEEDED",
    "STAGE_FAILED",
    "DUPLICATE_IGNORED",
    "RUN_WAITING",
    "RUN_RESUMED",
    "EVENT_RECEIVED",
    "EVENT_REJECTED",
    "EVENT_BUFFERED",
    "EVENT_CONSUMED",
    "EVENT_EXPIRED",
    "RUN_CONTINUED",
    "RUN_MIGRATED",
    "RUN_FORKED",
    "RUN_REWOUND",
    "SLOT_TAKEN",
    "SLOT_GIVEN_BACK",
    "SLOT_REFUSED",
    "TRANSITION",
    "CONTRACT_VIOLATION",
    "INCONSISTENCY",
    "DEAD_LETTERED",
    "DEAD_LETTER_SKIPPED",
    "SERVICE_FAILED",
    "ACTION_COMPLETED",
    "TOOL_CALLED",
    "TOOL_REFUSED",
    "TOOL_DECIDED",
    "BUDGET_SPENT",
    "BUDGET_DECIDED",
    "COMPENSATION_STARTED",
    "COMPENSATION_SUCCEEDED",
    "COMPENSATION_FAILED",
    "RUN_COMPLETED",
    "RUN_ABORTED",
]
# The events that record how a run ended (the concurrency slots it gives back may follow them).
ENDING_EVENTS: frozenset[str] = frozenset({"RUN_COMPLETED", "RUN_ABORTED"})


class AuditEvent(WireModel):
    """One entry of a run's audit trail.

    Each entry's hash chains it to the one before (see `dsmo audit verify`), so the trail shows
    any edit or gap.

    Attributes:
        seq: Position in the trail, from 1, without gaps.
        type: What happened (`RUN_CREATED`, `STAGE_SUCCEEDED`, `RUN_RESUMED`, ...).
        run_id: The run.
        at: When, by the workflow's deterministic clock.
        stage: The node it concerns, if any.
        attempt: The stage attempt, for stage events.
        workflow_version: The hash of the definition the run follows.
        agent_version: The processor's version, for stage events.
        artifact_uris: The S3 objects it refers to (inputs, outputs, snapshots).
        data: The event's details (event ids, routes taken, errors, summaries).
    """

    seq: int
    type: AuditType
    run_id: str
    at: datetime
    stage: str | None = None
    attempt: int | None = None
    workflow_version: str
    agent_version: str | None = None
    artifact_uris: list[str] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)


class TrailView(WireModel):
    """A run's audit trail as the `trail` query gives it.

    Attributes:
        head: The segments in the store (`audit/{run_id}/segments/`) and where they end.
        events: The events after them, in order.
    """

    head: TrailHead
    events: list[AuditEvent]


class WaitCheckpoint(WireModel):
    kind: str
    node: str
    until: datetime | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    requested: list[str] = Field(default_factory=list)
    received: dict[str, str] = Field(default_factory=dict)
    attempt: int = 1
    tool_loop: ToolLoop | None = None  # a tool-using node waiting for an approval: where its visit is


class Checkpoint(WireModel):
    """What a run carries into its next Temporal run when it continues as new.

    Nothing here grows with the run's age: the trail's earlier events are in the store
    (``trail``), event ids are a bounded window of fingerprints (``seen_ids``), and ``path``
    and ``committed`` keep their latest entries. ``seen_event_ids`` and a long ``audit`` are
    what runs from before these bounds carried.
    """

    node: str | None
    step: int
    variables: dict[str, Any]
    seen_event_ids: list[str] = Field(default_factory=list)
    audit: list[AuditEvent] = Field(default_factory=list)  # the trail's tail (all of it, before segments)
    trail: TrailHead | None = None
    seen_ids: str = ""
    input_uri: str | None
    wait: WaitCheckpoint | None = None
    generation: int = 1
    slot_held: bool = False
    slots: list[str] = Field(default_factory=list)  # locks of concurrency keys the run holds a slot of
    # The run's keys live in sharded key locks; absent (False) in runs from before: a lock per value.
    sharded_keys: bool = False
    slots_wanted: list[str] = Field(default_factory=list)  # held slots a run waits for
    started_at: datetime
    path: list[str] = Field(default_factory=list)
    visits: dict[str, int] = Field(default_factory=dict)
    committed: list[str] = Field(default_factory=list)
    config_ref: str | None = None
    routed_to_fail_safe: bool = False
    saga: list[dict[str, Any]] = Field(default_factory=list)
    inbox: list[InboxEntry] = Field(default_factory=list)
    # Set when the run continues on another version of its definition (a migration).
    migration: MigrationRecord | None = None
    # Where the run first entered each node of its current line (bounded by the graph's size).
    first_entries: dict[str, NodeEntry] = Field(default_factory=dict)
    # Set when the run goes back to an earlier node (a rewind): it re-executes its record up to it.
    rewind: RewindRecord | None = None
    # What the run's model calls spent so far (a few totals: `run.usage`); spent stays spent.
    usage: dict[str, int | float] = Field(default_factory=dict)
    # ... of which its own model calls (not answers read from a record), which its search
    # attributes show; None from a run before the two were told apart: all of ``usage``.
    usage_paid: dict[str, int | float] | None = None
    # The run budget's limits a person raised (`BUDGET_DECIDED`): at most three numbers.
    budget_raised: dict[str, int | float] = Field(default_factory=dict)


class Compensation(WireModel):
    """One entry of the saga stack: how to undo a step that succeeded."""

    node: str
    action: str
    kind: str
    output: dict[str, Any] = Field(default_factory=dict)
    key: str


class ExecutionRequest(WireModel):
    """Input of the AgentExecution workflow: the pinned definition and the run's variables.

    A program builds one only to start a run another way than `DsmoClient.start` (see
    `DsmoClient.start_request`); the fields past ``input`` are DSMO's own.

    Attributes:
        definition: The definition the run is pinned to.
        input: The run's input variables.
        correlation_id: An id of the caller's, kept with the run.
        parent_run_id: The run that started this one, for a child run.
        history_limit: Continue as new once the history has this many events.
        checkpoint: Where a continued run picks up (set by the run itself).
        start_at: The node a redrive starts at.
        origin: What this run redrives, replays or forks.
        replay: How a replay, a fork or a what-if takes the original's record.
        prepared: What a starter already wrote (input, config snapshot, search attributes).
        slots_claimed: The concurrency-key locks a starter claimed a slot of for this run.
        key_locks_queue: The task queue where the run's key locks live.
        priority: 1 (highest) to 5, on Temporal's task queues and in a key's line.
        subject: The run's data subject and its keys.
        generation: The workflow code generation a DSMO starter started the run for.
        revision: The revision of that code's later changes it was started for.
    """

    definition: AgentDefinition
    input: dict[str, Any] = Field(default_factory=dict)
    correlation_id: str | None = None
    parent_run_id: str | None = None
    # Continue as new once the history has this many events (Temporal's own suggestion also counts).
    history_limit: int = Field(default=10_000, ge=20)
    checkpoint: Checkpoint | None = None
    start_at: str | None = None  # a redrive starts at the failed stage
    origin: dict[str, str] = Field(default_factory=dict)  # {"redriveOf": run} or {"replayOf": run}
    replay: ReplayPlan | None = None
    # Set by a DSMO starter that wrote the input artifact and config snapshot and set the start
    # search attributes itself: the workflow then skips its own preparation (a local activity).
    # Runs started before this field existed lack it and replay as they ran; a worker older than
    # it refuses such a request (extra fields are forbidden) rather than run it another way.
    prepared: PreparedRun | None = None
    # Locks of concurrency keys a starter claimed a slot of for this run before starting it.
    slots_claimed: list[str] = Field(default_factory=list)
    # Where the locks of the run's concurrency keys live: the task queue a DSMO starter started it
    # on (a lock runs on the workers of the runs it serves). Set only for runs with keys.
    key_locks_queue: str | None = None
    # 1 (highest) to 5: the run's tasks go first on Temporal's task queues, and in a key's line.
    priority: int | None = Field(default=None, ge=1, le=5)
    # The run's data subject and its keys (contracts/subject_io.py): set by a DSMO starter that
    # rendered the definition's `subject`, by a parent for its children (who inherit it unless
    # their definition names another), and by the run itself when it had to learn them.
    subject: SubjectKey | None = None
    # Set by a DSMO starter (and by the run for its next execution, and for a rewind or a move):
    # the run takes every change of this generation of DSMO's workflow code without asking
    # `workflow.patched`, so it writes no marker for them (workflows/common/patches.py). Runs
    # started without it ask as before; a worker older than it refuses such a request (extra
    # fields are forbidden), so Temporal retries the task until a newer worker takes it.
    generation: int | None = Field(default=None, ge=1)
    # The same for the changes made since (`REVISION_CHANGES`), bounded by this code's `REVISION`:
    # a worker without a revision refuses a request that claims it.
    revision: int | None = Field(default=None, ge=1, le=REVISION)

    def started_on(self, task_queue: str) -> ExecutionRequest:
        """This request to start a new run on ``task_queue``: a run with concurrency keys has its locks there.

        Args:
            task_queue: Where the run starts.

        Returns:
            The request, with its key locks' task queue set when it has concurrency keys.
        """
        if not self.definition.concurrency or self.replay is not None or self.checkpoint is not None:
            return self
        return self.model_copy(update={"key_locks_queue": task_queue})


class WorkflowTaskFailure(WireModel):
    """A run whose workflow task keeps failing: Temporal retries it and the run cannot move."""

    attempts: int
    since: datetime | None = None
    error: str


class StatusView(WireModel):
    """What a run is doing now: its status, where it is, what it waits for and, once it ended, how.

    Attributes:
        run_id: The run.
        agent: The definition's agent name.
        workflow_version: The hash of the definition the run follows.
        status: `pending`, `running`, `waiting` or one of the terminal statuses.
        current_node: The node being run or waited in.
        waiting_for: While waiting: `response`, `document`, `signature`, `test`, `event`, `approval`,
            `agent` or `delay`.
        waiting_until: While waiting: when the wait times out.
        waiting_data: While waiting: what the wait needs (expected sender, requested documents, ...).
        pending_reason: While pending: why (a delayed start, or the agent's concurrency limit).
        path: The nodes that ran, in order.
        config_ref: The S3 URI of the run's configuration snapshot.
        started_at: When the run started.
        updated_at: When its status last changed.
        completed_at: When it ended.
        result_type: Once ended: `success`, `failure`, `timeout` or `cancelled`.
        result_summary: Once ended: the outcome in one line.
        error_message: Once failed: why.
        failed_action_id: Once failed: the node that failed.
        cancelled_by: Once cancelled: who asked.
        cancel_reason: Once cancelled: the reason given.
        compensation: Once compensated: `{status: complete|partial, compensated, failed}`.
        inbox: Events kept for a wait ahead (count, kinds, the oldest), when there are any.
        usage: What its model calls spent, once it made one: ``tokens``, ``promptTokens``,
            ``completionTokens``, ``modelCalls`` and, with a price table, ``costUsd``.
        queued_for: While pending in line for a concurrency key's slot: the id of the key's lock.
        throttled: While a stage waits for its node's throttle: which stage, and the rate it waits for.
        problem: Why the run cannot answer or move (no worker polls its task queue, its workflow
            task keeps failing); the other fields then come from Temporal's visibility.
        workflow_task_failure: When the workflow task keeps failing: attempts, since when, the error.
    """

    run_id: str
    agent: str
    workflow_version: str
    status: RunStatus
    current_node: str | None = None
    waiting_for: str | None = None
    waiting_until: datetime | None = None
    waiting_data: dict[str, Any] | None = None
    pending_reason: str | None = None
    path: list[str] = Field(default_factory=list)
    config_ref: str | None = None
    started_at: datetime | None = None
    updated_at: datetime | None = None
    completed_at: datetime | None = None
    result_type: str | None = None
    result_summary: str | None = None
    error_message: str | None = None
    failed_action_id: str | None = None
    cancelled_by: str | None = None
    cancel_reason: str | None = None
    compensation: dict[str, Any] | None = None
    inbox: InboxView | None = None
    usage: dict[str, int | float] | None = None
    # While pending in line for a concurrency key's slot: the key's lock (the client adds the place).
    queued_for: str | None = None
    throttled: str | None = None
    # Set by the client, never by the run: why the run cannot answer or move (no worker polls
    # its task queue, its workflow task keeps failing). The rest then comes from visibility.
    problem: str | None = None
    workflow_task_failure: WorkflowTaskFailure | None = None


class ExecutionResult(WireModel):
    """How a run ended: the workflow's result, returned by `DsmoClient.result`.

    Attributes:
        run_id: The run.
        status: The terminal status (`completed`, `failed`, `timeout`, `cancelled`).
        completed_at: When it ended.
        result_type: `success`, `failure`, `timeout` or `cancelled`.
        result_summary: The outcome in one line.
        error_message: Why it failed, if it did.
        failed_action_id: The node that failed, if any.
        cancelled_by: Who cancelled it, if anyone.
        cancel_reason: The reason given for cancelling.
        compensation: What the saga undid: `{status: complete|partial, compensated, failed}`.
        path: The nodes that ran, in order.
        variables: The run's variables at the end.
    """

    run_id: str
    status: RunStatus
    completed_at: datetime
    result_type: Literal["success", "failure", "timeout", "cancelled"]
    result_summary: str | None = None
    error_message: str | None = None
    failed_action_id: str | None = None
    cancelled_by: str | None = None
    cancel_reason: str | None = None
    compensation: dict[str, Any] | None = None  # {status: complete|partial, compensated, failed}
    path: list[str] = Field(default_factory=list)  # the nodes that ran, in order (the state path)
    variables: dict[str, Any] = Field(default_factory=dict)
