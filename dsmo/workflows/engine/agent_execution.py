"""AgentExecution: the orchestrator; it alone decides what happens next in a run.

The class holds what Temporal calls: the run loop, the signal, update and query handlers, and
continue-as-new. What each node does lives with its kind (`engine/node_step.py` picks the
handler); the run's state travels as one `Run` (`run/context.py`).

Longer than most modules: Temporal reads a workflow's handlers off its class, so every signal,
update and query of a run is declared here, each handing its work to its module in a line.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from dsmo.workflows.common import patches
from dsmo.workflows.common.patches import NEXT_EXECUTION

# Passed through: any sandbox (a worker's, a Replayer's) shares DSMO's modules instead of
# re-importing them (and the CEL library's) for every workflow run.
with workflow.unsafe.imports_passed_through():
    from dsmo.workflows.changes import fork_point, rewind_point, run_migration
    from dsmo.workflows.common.status import RunStatus
    from dsmo.workflows.contracts.migration_io import (
        MIGRATE_CHECK_QUERY,
        MIGRATE_UPDATE,
        MigrationAck,
        MigrationRequest,
    )
    from dsmo.workflows.contracts.rewind_io import REWIND_UPDATE, RewindAck, RewindRequest
    from dsmo.workflows.contracts.run_records import (
        AuditEvent,
        ExecutionRequest,
        ExecutionResult,
        StatusView,
        TrailView,
    )
    from dsmo.workflows.engine import hand_over
    from dsmo.workflows.engine.beginning import begin
    from dsmo.workflows.engine.endings import finish_cancelled, finish_completed, finish_early
    from dsmo.workflows.engine.endings import finish_cancelled_handing_over as finish_handing_over
    from dsmo.workflows.engine.node_step import step_from
    from dsmo.workflows.events.resume_events import (
        DUPLICATE_NOT_RECORDED,
        EVENT_KINDS,
        EventAck,
        EventRejected,
        parse_update,
    )
    from dsmo.workflows.run import intake
    from dsmo.workflows.run.context import Run
    from dsmo.workflows.run.control import ContinueAsNewDue, RunEnded, ServiceFailed
    from dsmo.workflows.run.dead_letters import service_failed
    from dsmo.workflows.run.signal_rules import well_formed_signal
    from dsmo.workflows.run.trail_segments import note_tail, write_segment

# workflow.patched ids: each names a change to what running executions do.
# A cancel while the run hands over ends it cancelled, unwound and exported (it ended with no
# record, or was carried over and lost). Written only by such runs.
CANCEL_WHILE_HANDING_OVER_PATCH = "cancel-while-handing-over"
# What a `migrate` update waiting for the run's next node boundary hears if the run ends first.
ENDED_FIRST = "the run ended before it reached its next node, so it did not move"


@workflow.defn(name="AgentExecution")
class AgentExecution:
    """One agent run: a durable state machine over its pinned definition."""

    @workflow.init
    def __init__(self, request: ExecutionRequest) -> None:
        self._run = Run.from_request(request)
        self.generation = request.generation  # read by common/patches.py
        self.revision = request.revision  # ... as is this

    @workflow.run
    async def run(self, request: ExecutionRequest) -> ExecutionResult:
        """Run the graph from its start (or from the checkpoint) to an ending."""
        run, state = self._run, self._run.state
        checkpoint = request.checkpoint
        # Expires the inbox's events; it writes nothing to history while the inbox is empty.
        self._keeper = asyncio.create_task(intake.keep_inbox(run))
        try:
            if checkpoint is None:
                await begin(run)
                node_id: str | None = request.start_at or run.definition.start
            else:
                state.status = RunStatus.RUNNING
                if checkpoint.migration is not None:
                    run_migration.arrive(run)
                elif checkpoint.rewind is not None:
                    rewind_point.arrive(run)
                else:
                    state.audit.record(
                        "RUN_CONTINUED",
                        at=workflow.now(),
                        stage=checkpoint.node,
                        data={"generation": checkpoint.generation},
                    )
                node_id = checkpoint.node
                if checkpoint.wait is not None and node_id is not None:
                    node_id = await step_from(run, node_id, resume=checkpoint.wait)
            while node_id is not None:
                note_tail(run)
                if rewind_point.due(run, node_id):
                    rewind_point.go_live(run, node_id)
                elif fork_point.due(run, node_id):
                    fork_point.go_live(run, node_id)
                # Between two nodes: a move asked while a node ran is decided here (run_migration.py).
                await run_migration.at_boundary(run, node_id)
                if run.continue_as_new_due() or run.replay_move_due(node_id, waiting=False):
                    raise ContinueAsNewDue(node_id)
                node_id = await step_from(run, node_id)
        except RunEnded as ended:
            rewind_point.abandon(run)
            await run_migration.no_more_boundaries(run, ENDED_FIRST)
            return await finish_early(run, ended)
        except ServiceFailed as failed:
            rewind_point.abandon(run)
            await run_migration.no_more_boundaries(run, ENDED_FIRST)
            return await finish_early(run, await service_failed(run, failed))
        except ContinueAsNewDue as due:
            try:
                await self._continue_as_new(due)
            except asyncio.CancelledError:
                if not patches.patched(CANCEL_WHILE_HANDING_OVER_PATCH):
                    raise  # runs from before ended Canceled here, with no record
            return await finish_handing_over(run, ENDED_FIRST)
        except asyncio.CancelledError:
            rewind_point.abandon(run)
            await run_migration.no_more_boundaries(run, ENDED_FIRST)
            return await finish_cancelled(run)
        await run_migration.no_more_boundaries(run, ENDED_FIRST)
        return await finish_completed(run)

    async def _continue_as_new(self, due: ContinueAsNewDue) -> None:
        """Hand the run over to its next generation; returns only if the run was cancelled meanwhile."""
        run = self._run
        await run_migration.at_boundary(run, due.node, due.wait)
        if run.migration is None and run.replay_move_due(due.node, waiting=due.wait is not None):
            run_migration.as_recorded(run, due.node, due.wait)
        round_trip_first = hand_over.taken()
        decide_move = functools.partial(run_migration.at_boundary, run, due.node, due.wait)
        if round_trip_first:
            await hand_over.handlers_done(run, decide_move)
        else:
            await workflow.wait_condition(workflow.all_handlers_finished)
        await write_segment(run)
        # Events recorded by handlers while the segment was written stay in the tail.
        if round_trip_first:
            await hand_over.settle(run, decide_move)
        else:
            await workflow.wait_condition(workflow.all_handlers_finished)
        # A cancel that arrived with the last await's wake-up has not reached this task yet
        # (Temporal delivers it on the next turn): it ends the run here, it is not carried over.
        if workflow.cancellation_reason() is not None and patches.patched(CANCEL_WHILE_HANDING_OVER_PATCH):
            return
        if run.rewind is not None:
            request = rewind_point.hand_over(run).model_copy(update=NEXT_EXECUTION)
            workflow.logger.info("Execution %s goes back to %s", run.state.run_id, run.rewind.request.to_node)
            workflow.continue_as_new(request)
        if run.migration is not None:
            request = run_migration.hand_over(run, due.node, due.wait).model_copy(update=NEXT_EXECUTION)
            target = request.definition
            workflow.logger.info("Execution %s moves to %s@%s", run.state.run_id, target.agent, target.version)
            workflow.continue_as_new(request)
        checkpoint = run.to_checkpoint(due.node, due.wait)
        workflow.logger.info("Execution %s continues as new (generation %d)", run.state.run_id, checkpoint.generation)
        workflow.continue_as_new(run.request.model_copy(update={"checkpoint": checkpoint, **NEXT_EXECUTION}))

    # -- moving to another version ---------------------------------------------------------

    @workflow.update(name=MIGRATE_UPDATE)
    async def migrate(self, request: MigrationRequest) -> MigrationAck:
        """Move this run to another published version of its agent (see run_migration.py)."""
        return await hand_over.answered(self._run, run_migration.take(self._run, request))

    @migrate.validator
    def _validate_migrate(self, request: MigrationRequest) -> None:
        run_migration.validate(self._run, request)

    @workflow.query(name=MIGRATE_CHECK_QUERY)
    def migrate_check(self, request: MigrationRequest) -> str | None:
        """Why this run would refuse the move now, or None (a dry run's question; nothing is written)."""
        return run_migration.refusal(self._run, request)

    # -- going back to an earlier node ----------------------------------------------------

    @workflow.update(name=REWIND_UPDATE)
    async def rewind(self, request: RewindRequest) -> RewindAck:
        """Send this waiting run back to an earlier node of its path (see rewind_point.py)."""
        return await hand_over.answered(self._run, rewind_point.take(self._run, request))

    @rewind.validator
    def _validate_rewind(self, request: RewindRequest) -> None:
        rewind_point.validate(self._run, request)

    # -- events in ---------------------------------------------------------------------------

    @workflow.signal(name="MESSAGE_RECEIVED")
    def message_received(self, payload: Any = None) -> None:
        """A reply from a person (raw signal; `deliver_event` is the acknowledged way)."""
        self._on_signal("MESSAGE_RECEIVED", payload)

    @workflow.signal(name="DOCUMENT_UPLOADED")
    def document_uploaded(self, payload: Any = None) -> None:
        """One requested document was uploaded."""
        self._on_signal("DOCUMENT_UPLOADED", payload)

    @workflow.signal(name="SIGNATURE_COMPLETED")
    def signature_completed(self, payload: Any = None) -> None:
        """The requested signature was given."""
        self._on_signal("SIGNATURE_COMPLETED", payload)

    @workflow.signal(name="TEST_COMPLETED")
    def test_completed(self, payload: Any = None) -> None:
        """The assigned test was completed."""
        self._on_signal("TEST_COMPLETED", payload)

    @workflow.signal(name="EVENT_COMPLETED")
    def event_completed(self, payload: Any = None) -> None:
        """The awaited (calendar) event happened."""
        self._on_signal("EVENT_COMPLETED", payload)

    @workflow.signal(name="TOOL_DECIDED")
    def tool_decided(self, payload: Any = None) -> None:
        """A person's decision on a tool call waiting for approval (raw signal; see `deliver_event`)."""
        self._on_signal("TOOL_DECIDED", payload)

    @workflow.signal(name="BUDGET_DECIDED")
    def budget_decided(self, payload: Any = None) -> None:
        """A person's decision on a spent budget: raise it or stop (raw signal; see `deliver_event`)."""
        self._on_signal("BUDGET_DECIDED", payload)

    @workflow.signal(name="SLOT_GRANTED")
    def slot_granted(self, payload: Any = None) -> None:
        """A lock gave this run a slot: its agent's rate limit, or a concurrency key's (``lock``)."""
        lock = payload.get("lock") if isinstance(payload, dict) else None
        if isinstance(lock, str):
            self._run.slots_granted.add(lock)
        else:
            self._run.slot_granted = True

    @workflow.signal(name="SLOT_REFUSED")
    def slot_refused(self, payload: Any = None) -> None:
        """A concurrency key's lock (``lock``) has no room for this run in its line (``reason``): it ends."""
        if isinstance(payload, dict) and isinstance(payload.get("lock"), str):
            self._run.slots_refused[payload["lock"]] = str(payload.get("reason") or "its line is full")

    @workflow.signal(name="SLOT_WANTED")
    def slot_wanted(self, payload: Any = None) -> None:
        """A run waits for a concurrency key's slot this run holds (``lock``): give it back when ending."""
        lock = payload.get("lock") if isinstance(payload, dict) else None
        if isinstance(lock, str):
            self._run.slots_wanted.add(lock)

    @workflow.update(name="deliver_event")
    def deliver_event(self, event: Any) -> EventAck:
        """Apply one resume event and say what became of it."""
        # The validator applied the strict rules to new updates; the handler also replays updates
        # accepted before those rules existed, so it does not apply them again.
        return intake.take(self._run, parse_update(event, strict=False), via="update")

    @deliver_event.validator
    def _validate_event(self, event: Any) -> None:
        # Runs before anything is written to history; raising here rejects the update. The two
        # judgements every way in gets: well formed (parse_update), and taken by the run (intake).
        try:
            intake.check(self._run, parse_update(event))
        except intake.DuplicateNotRecorded as err:
            status = self._run.state.status.value
            raise ApplicationError(str(err), status, type=DUPLICATE_NOT_RECORDED, non_retryable=True) from None
        except EventRejected as err:
            raise ApplicationError(str(err), type="EventRejected", non_retryable=True) from None

    def _on_signal(self, event_type: str, payload: Any) -> None:
        # A bad signal never crashes or blocks the run: it is recorded as rejected.
        assert event_type in EVENT_KINDS
        state = self._run.state
        try:
            intake.take(self._run, well_formed_signal(event_type, payload), via="signal")
        except EventRejected as err:
            event_id = payload.get("event_id") if isinstance(payload, dict) else None
            state.reject(event_type, str(err), via="signal", event_id=event_id)
            workflow.logger.warning("Rejected %s for %s: %s", event_type, state.run_id, err)

    # -- queries -----------------------------------------------------------------------------

    @workflow.query(name="status")
    def status(self) -> StatusView:
        """The run's status, wait and terminal record."""
        run = self._run
        view = run.state.view()
        return view.model_copy(update={"queued_for": run.slot_asked}) if run.slot_asked else view

    @workflow.query(name="variables")
    def variables(self) -> dict[str, Any]:
        """The run's variables."""
        return self._run.state.variables

    @workflow.query(name="events")
    def events(self) -> list[AuditEvent]:
        """The run's audit trail since its last segment in the store (all of it, for most runs)."""
        return self._run.state.audit.events

    @workflow.query(name="trail")
    def trail(self) -> TrailView:
        """Where the trail's segments end in the store, and the events after them."""
        trail = self._run.state.audit
        return TrailView(head=trail.head, events=trail.events)
