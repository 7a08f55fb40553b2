"""The mutable state of one run and the only place that changes its status.

Every status change goes through `next_status` (the seed's table) and is mirrored to the
run's search attributes, so `temporal workflow list` and the Web UI always agree with the
`status` query. Longer than most modules: the state, its status view and the writes that
mirror it are one class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate

from dsmo.workflows.common import patches
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.status import RunStatus, next_status
from dsmo.workflows.contracts.run_records import ExecutionResult, StatusView
from dsmo.workflows.definition.sensitive import masked_wait_data
from dsmo.workflows.events.inbox import InboxEntry, inbox_view
from dsmo.workflows.events.resume_events import EventAck, ResumeEvent
from dsmo.workflows.events.seen_ids import SeenIds
from dsmo.workflows.run.audit import AuditTrail
from dsmo.workflows.run.status_writes import StatusWrites

# Keyword search attributes are indexed up to a bounded length; an address longer than this is cut.
ASSIGNEE_CHARS = 200
# workflow.patched id: a run that ends from a wait says so before it unwinds (its search
# attributes say `running`). Written only by a run that ends while waiting.
ENDING_PATCH = "ending-says-so"
# workflow.patched id: an upsert also carries the run's model spend (LlmCostUsd, LlmTokens).
# Asked only by a run that has spent something, so runs without model calls gain no marker.
SPEND_PATCH = "spend-search-attributes"
# workflow.patched id: the search attributes show what a run's own model calls spent, not answers
# a replay read from its original's record. Asked only by a run that read some.
PAID_SPEND_PATCH = "paid-spend-only"


@dataclass
class Waiting:
    kind: str
    node: str
    until: datetime | None
    data: dict[str, Any]
    requested: list[str] = field(default_factory=list)  # documents a document wait needs
    received: dict[str, str] = field(default_factory=dict)  # document name -> URL, so far

    def assignee(self) -> str | None:
        """Who the wait is on: the expected sender of a reply, or whom a request was sent to."""
        who = self.data.get("expectedFrom") or self.data.get("to")
        return str(who)[:ASSIGNEE_CHARS] if who else None


@dataclass
class RunState:
    run_id: str
    agent: str
    workflow_version: str
    started_at: datetime
    variables: dict[str, Any]
    audit: AuditTrail
    status: RunStatus = RunStatus.PENDING
    current_node: str | None = None
    waiting: Waiting | None = None
    resume_event: ResumeEvent | None = None
    seen_event_ids: SeenIds = field(default_factory=SeenIds)
    inbox: list[InboxEntry] = field(default_factory=list)  # events kept for a wait ahead, oldest first
    duplicates_recorded: int = 0  # DUPLICATE_IGNORED records in this generation of the run
    updated_at: datetime | None = None
    result: ExecutionResult | None = None
    pending_reason: str | None = None
    throttled: str | None = None  # a stage waiting for its throttle's token (throttle_pass.py)
    path: list[str] = field(default_factory=list)  # nodes in the order they ran: the state path
    config_ref: str | None = None
    # Started without DSMO's client: no AgentName or WorkflowVersion, set by the first upsert.
    identity_unpublished: bool = False
    # WaitingOn and WaitingSince hold a value: the next upsert outside a wait clears them.
    wait_attributes_set: bool = False
    # The status the run is ending in while it unwinds and settles (`begin_ending`); it takes
    # no request from then on, and is no longer waiting.
    ending: RunStatus | None = None
    # What the run's model calls spent (spend.py): `run.usage` in conditions, the status's `usage`.
    usage: dict[str, int | float] = field(default_factory=dict)
    # ... of which the run's own model calls, not answers read from a record (a replay's, a
    # fork's before it goes live): what its search attributes show, so spend is counted once.
    usage_paid: dict[str, int | float] = field(default_factory=dict)
    # The spend the search attributes show (this execution's last upsert), so an upsert repeats
    # it only after it changed.
    usage_published: tuple[float, int] | None = None
    # The run budget's limits a person raised (`BUDGET_DECIDED`), over the definition's.
    budget_raised: dict[str, int | float] = field(default_factory=dict)
    # This execution's writes of the search attributes: merged, one per activation at most.
    writes: StatusWrites = field(default_factory=StatusWrites)

    # -- status -----------------------------------------------------------------------------

    def enter(self, target: RunStatus, *, published: bool = False) -> None:
        """Move to ``target``; ``published`` when the search attributes already say so."""
        self.status = next_status(self.status, target)
        self.updated_at = workflow.now()
        if target is not RunStatus.WAITING:
            self.waiting = None
        if target is not RunStatus.PENDING:
            self.pending_reason = None
        if not published or self.identity_unpublished:
            self.publish()

    def begin_ending(self, status: RunStatus, *, publish: bool) -> None:
        """The run ends in ``status``: from now on it says so and takes no request.

        It leaves its wait at once (shown `running` while its saga unwinds and it settles);
        `enter` gives it ``status`` once its terminal record is made. ``publish``: mirror
        that to the search attributes now (runs from before this did not).
        """
        if self.ending is not None:
            return
        self.ending = status
        if self.status is RunStatus.WAITING:
            self.waiting = None
            if publish:
                self.publish(shown=RunStatus.RUNNING)

    def ending_problem(self) -> str | None:
        """Why a run that is ending takes no request (every validator refuses with it); None otherwise."""
        if self.ending is None or self.status.terminal:
            return None
        return f"status: the run is ending ({self.ending.value}); it takes no more requests"

    def publish(self, *, shown: RunStatus | None = None) -> None:
        """Mirror status (or ``shown``) and wait to the search attributes (status_writes.py)."""
        self.writes.write(self._status_updates(shown))

    def _status_updates(self, shown: RunStatus | None) -> list[SearchAttributeUpdate[Any]]:
        status = shown or self.status
        updates: list[SearchAttributeUpdate[Any]] = [sa.AGENT_EXECUTION_STATUS.value_set(status.value)]
        if self.identity_unpublished:
            updates += [sa.AGENT_NAME.value_set(self.agent), sa.WORKFLOW_VERSION.value_set(self.workflow_version)]
            self.identity_unpublished = False
        if self.waiting is None:
            updates += [sa.WAITING_FOR.value_unset(), sa.WAITING_UNTIL.value_unset()]
            if self.wait_attributes_set:  # the console's two, only after a wait set them
                updates += [sa.WAITING_ON.value_unset(), sa.WAITING_SINCE.value_unset()]
                self.wait_attributes_set = False
        else:
            updates.append(sa.WAITING_FOR.value_set(self.waiting.kind))
            updates.append(sa.WAITING_SINCE.value_set(self.updated_at or workflow.now()))
            self.wait_attributes_set = True
            assignee = self.waiting.assignee()
            updates.append(sa.WAITING_ON.value_set(assignee) if assignee else sa.WAITING_ON.value_unset())
            if self.waiting.until is not None:
                updates.append(sa.WAITING_UNTIL.value_set(self.waiting.until))
            else:
                updates.append(sa.WAITING_UNTIL.value_unset())
        updates += self._spend_updates()
        return updates

    def _spend_updates(self) -> list[SearchAttributeUpdate[Any]]:
        """The run's spend, when it changed since the search attributes last showed it."""
        shown = self.usage
        if self.usage_paid != self.usage and patches.patched(PAID_SPEND_PATCH):
            shown = self.usage_paid
        spent = (float(shown.get("costUsd", 0.0)), int(shown.get("tokens", 0)))
        if not shown.get("modelCalls") or spent == self.usage_published:
            return []
        if not patches.patched(SPEND_PATCH):
            return []
        self.usage_published = spent
        return [sa.LLM_COST_USD.value_set(spent[0]), sa.LLM_TOKENS.value_set(spent[1])]

    def begin_wait(self, waiting: Waiting, *, record: bool = True, trail_key: bytes | None = None) -> None:
        """Enter WAITING for ``waiting``; ``record`` it as RUN_WAITING (a resumed wait was recorded before).

        ``trail_key``: the run's subject's fingerprint key. The trail then names the person the wait
        is on (``expectedFrom``, ``to``) by a keyed fingerprint; ``waiting`` keeps the value, which
        the run matches events against. The same for a tool call's arguments and the model's words
        while it waits for approval.
        """
        self.waiting = waiting
        self.resume_event = None
        self.enter(RunStatus.WAITING)
        if record:
            self.audit.record(
                "RUN_WAITING",
                at=workflow.now(),
                stage=waiting.node,
                data={
                    "waitingFor": waiting.kind,
                    "waitingUntil": _iso(waiting.until),
                    **masked_wait_data(waiting.data, trail_key),
                },
            )

    # -- resume events ----------------------------------------------------------------------
    # Which events are applied, kept or refused is decided in intake.py, which alone adds to
    # seen_event_ids; these only record.

    def record_duplicate(self, event: ResumeEvent, *, via: str) -> EventAck:
        """An event id seen before: recorded once more as DUPLICATE_IGNORED, nothing else happens."""
        self.duplicates_recorded += 1
        self.audit.record(
            "DUPLICATE_IGNORED",
            at=workflow.now(),
            stage=self.current_node,
            data={"eventType": event.type, "eventId": event.event_id, "via": via},
        )
        return EventAck(event_id=event.event_id, accepted=False, duplicate=True, status=self.status)

    def apply_now(self, event: ResumeEvent) -> EventAck:
        """Hand ``event`` to the wait in progress (intake.py checked that it takes it and noted its id)."""
        waiting = self.waiting
        assert waiting is not None
        if event.type == "DOCUMENT_UPLOADED":
            missing = self.receive_document(waiting, event)
            if missing:
                return EventAck(
                    event_id=event.event_id,
                    accepted=True,
                    status=self.status,
                    detail=f"still waiting for: {', '.join(missing)}",
                )
        self.resume_event = event
        return EventAck(event_id=event.event_id, accepted=True, status=self.status)

    def receive_document(self, waiting: Waiting, event: ResumeEvent, *, record_partial: bool = True) -> list[str]:
        """Note one uploaded document; returns the requested ones still missing.

        A partial upload is recorded (EVENT_RECEIVED, unless ``record_partial`` is False because
        the caller records it) and the run keeps waiting for the rest.
        """
        waiting.received[event.data["document"]] = event.data["url"]
        missing = [name for name in waiting.requested if name not in waiting.received]
        if missing:
            if record_partial:
                self.audit.record(
                    "EVENT_RECEIVED",
                    at=workflow.now(),
                    stage=waiting.node,
                    data={
                        "eventType": event.type,
                        "eventId": event.event_id,
                        "document": event.data["document"],
                        "missing": missing,
                    },
                )
            waiting.data["received"] = sorted(waiting.received)
        return missing

    def reject(self, event_type: str, reason: str, *, via: str, event_id: Any = None) -> None:
        self.audit.record(
            "EVENT_REJECTED",
            at=workflow.now(),
            stage=self.current_node,
            data={
                "eventType": event_type,
                "eventId": event_id if isinstance(event_id, str) else None,
                "reason": reason,
                "via": via,
            },
        )

    # -- views ------------------------------------------------------------------------------

    def view(self) -> StatusView:
        result = self.result
        waiting = self.waiting
        # Ending from a wait: no longer waiting, not yet ended (its terminal record is being made).
        leaving = self.status is RunStatus.WAITING and self.ending is not None
        return StatusView(
            run_id=self.run_id,
            agent=self.agent,
            workflow_version=self.workflow_version,
            status=RunStatus.RUNNING if leaving else self.status,
            current_node=self.current_node,
            waiting_for=waiting.kind if waiting else None,
            waiting_until=waiting.until if waiting else None,
            waiting_data=dict(waiting.data) if waiting else None,
            pending_reason=self.pending_reason,
            throttled=self.throttled,
            path=list(self.path),
            config_ref=self.config_ref,
            started_at=self.started_at,
            updated_at=self.updated_at,
            completed_at=result.completed_at if result else None,
            result_type=result.result_type if result else None,
            result_summary=result.result_summary if result else None,
            error_message=result.error_message if result else None,
            failed_action_id=result.failed_action_id if result else None,
            cancelled_by=result.cancelled_by if result else None,
            cancel_reason=result.cancel_reason if result else None,
            compensation=result.compensation if result else None,
            inbox=inbox_view(self.inbox),
            usage=dict(self.usage) or None,
        )


def say_ending(state: RunState, status: RunStatus) -> None:
    """The run is ending in ``status``: it says so at once, before anything is awaited.

    Refusing requests from then on changes no command; showing that a run left its wait is an
    upsert, the one command runs from before did not make, so only that is behind the patch (and
    the patch is asked only then: a run that ends from running writes no marker).
    """
    if state.ending is None:
        state.begin_ending(status, publish=state.status is RunStatus.WAITING and patches.patched(ENDING_PATCH))


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
