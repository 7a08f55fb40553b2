"""`RunHandle`: one run, by id, and everything that can be asked of it or done to it.

Shaped like Temporal's `WorkflowHandle`: `DsmoClient.start` returns one, `DsmoClient.run(run_id)`
gives one without a call to the server; each method is one question or one change. The client's
`run_id`-first shortcuts call the same functions, so the two always agree.

Longer than most modules because `RunHandle` is one class (a class stays in one module) and it is
where each per-run call of the public API is documented, every option with its Args/Returns/Raises.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from temporalio.client import WorkflowExecutionDescription
from temporalio.service import RPCError

from dsmo.client import (
    forks,
    history_check,
    migration,
    replay,
    rewinds,
    run_export,
    run_requests,
    run_status,
    run_stream,
    run_trails,
    status_views,
    trail_pages,
)
from dsmo.client.client_errors import RunNotFound
from dsmo.client.core import ClientCore
from dsmo.client.flow_starts import StartReport
from dsmo.client.replay import ReplayReport
from dsmo.client.rpc_errors import rpc_error
from dsmo.client.run_export import RunExport
from dsmo.client.run_stream import StreamItem
from dsmo.client.trail_pages import TrailPage
from dsmo.client.trail_store import TrailVerification
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.migration_io import MigrationAck
from dsmo.workflows.contracts.rewind_io import RewindAck
from dsmo.workflows.contracts.run_records import AuditEvent, ExecutionResult, StatusView, TrailView
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.events.resume_events import EventAck

DEBOUNCED_POLL_SECONDS = 0.5  # how often a debounced start's handle looks for its batch's run


class RunHandle:
    """One run of an agent, by its id.

    Example:
        ```python
        run = await client.start("candidate-screening", {"candidate": {...}})
        await run.wait_for_status({RunStatus.WAITING})
        await run.respond("Yes, still interested")
        print((await run.result()).status)
        ```

    Args:
        core: The client's core, which the handle asks through.
        run_id: The run's id.
    """

    def __init__(self, core: ClientCore, run_id: str) -> None:
        self._core = core
        self.run_id = run_id

    def __repr__(self) -> str:
        return f"RunHandle({self.run_id!r})"

    # -- reading ------------------------------------------------------------------------------

    async def status(self) -> StatusView:
        """Where the run stands now: status, the wait it is in, its terminal record.

        A run whose workflow task keeps failing, or whose task queue no worker polls, cannot
        answer the `status` query. An ended run's view then comes from the record it ended with
        (its result in Temporal's history: no worker needed); otherwise it holds what visibility
        knows (status, wait, deadline) and says why in ``problem``.

        Returns:
            Status, current node, the WAITING structure, variables and any problem.

        Raises:
            RunNotFound: No run has this id.
        """
        return await run_status.status(self._core, self.run_id)

    async def result(self) -> ExecutionResult:
        """Wait for the run to end; failed, timed-out and cancelled runs return their record too.

        Returns:
            The run's final status, variables, path and outcome.

        Raises:
            WorkflowTaskFailing: The run's workflow task keeps failing, so it cannot end until
                the cause is fixed (raised instead of waiting for ever).
            RunNotFound: No run has this id.
        """
        return await run_status.result(self._core, self.run_id)

    async def wait_for_status(
        self, statuses: set[RunStatus], *, timeout: float = 30.0, interval: float = 0.1
    ) -> StatusView:
        """Poll the run's status until it is one of ``statuses``.

        Args:
            statuses: The statuses to wait for.
            timeout: Seconds to wait at most.
            interval: Seconds between polls.

        Returns:
            The status view once it matches.

        Raises:
            WorkflowTaskFailing: The run's workflow task keeps failing.
            DsmoError: The run ended in another status, or the timeout passed.
        """
        return await run_status.wait_for_status(self._core, self.run_id, statuses, timeout=timeout, interval=interval)

    async def variables(self) -> dict[str, Any]:
        """The run's variables (its input, event variables, ``stages``, ``steps``) as it holds them now.

        Returns:
            Name -> value.

        Raises:
            RunNotFound: No run has this id.
        """
        return await run_status.variables(self._core, self.run_id)

    async def events(self, *, live: bool = False) -> list[AuditEvent]:
        """The run's audit trail so far, oldest first (`events_page` reads a long one in pages).

        An ended run exported its whole trail to the store; that export is read, so an ended
        run's trail needs no worker (and no replay of its history).

        Args:
            live: Ask the run itself even if it has ended (needs a worker): its own record, to
                check the export against.

        Returns:
            The audit events, in order.

        Raises:
            RunNotFound: No run has this id.
            NoWorker: No worker answers a run that has not ended (or exported no trail).
        """
        return await run_trails.events(self._core, self.run_id, live=live)

    def stream(self, *, after: str | None = None) -> AsyncIterator[StreamItem]:
        """The run's live stream: its trail as it grows, its model's tokens as they arrive, until
        it has ended (see `run_stream`; the ingress serves the same as server-sent events).

        Args:
            after: An item's ``id``: resume after that item (None: from the run's start).

        Returns:
            An async iterator of `StreamItem`.

        Raises:
            BadCursor: ``after`` is not an id the stream gave (on the first step).
            RunNotFound: No run has this id.
        """
        return run_stream.follow(self._core, self.run_id, after=after)

    async def events_page(
        self,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int = trail_pages.DEFAULT_LIMIT,
        live: bool = False,
    ) -> TrailPage:
        """One page of the trail, reading only the part of it the page needs.

        Args:
            after: Events after this sequence number (a page's ``next_after``).
            before: Events before this sequence number (a page's ``previous_before``).
            limit: At most this many events (1 to 1000). With neither cursor: the latest ones.
            live: As for `events`.

        Returns:
            The events, the trail's length, and the cursors of the pages next to it.

        Raises:
            DsmoError: A cursor or the limit is out of range.
            RunNotFound: No run has this id.
        """
        return await trail_pages.trail_page(self._core, self.run_id, after=after, before=before, limit=limit, live=live)

    def event_pages(
        self, *, after: int = 0, limit: int = trail_pages.MAX_LIMIT, live: bool = False
    ) -> AsyncIterator[TrailPage]:
        """The trail from ``after`` to its end, page by page (`events_page` with each next cursor).

        Args:
            after: Start after this sequence number (0: from the start).
            limit: Events a page (1 to 1000).
            live: As for `events`.

        Returns:
            An async iterator of the pages; one page of events is parsed at a time.

        Raises:
            DsmoError: ``after`` or ``limit`` is out of range.
            RunNotFound: No run has this id.
        """
        return trail_pages.trail_pages(self._core, self.run_id, after=after, limit=limit, live=live)

    async def trail(self) -> TrailView:
        """Where the run's trail segments in the store end (by Temporal's own record), and the events after.

        Returns:
            The head (segments, last sequence number, its chain hash) and the events after it.

        Raises:
            RunNotFound: No run has this id.
        """
        return await run_trails.trail(self._core, self.run_id)

    async def describe(self) -> WorkflowExecutionDescription:
        """Temporal's own description of the run's workflow: status, times, search attributes, memo.

        Returns:
            The description (``typed_search_attributes``, ``await memo()``, ``close_time``, ...).

        Raises:
            RunNotFound: No run has this id.
            DsmoError: Temporal cannot be reached.
        """
        try:
            return await self._core.handle(self.run_id).describe()
        except RPCError as err:
            raise rpc_error(self._core.settings, self.run_id, err) from None

    async def from_export(self) -> tuple[StatusView, list[AuditEvent]]:
        """The run as the trail it exported tells it: for a run Temporal no longer has (its
        subject erased, or past the namespace's retention), what `status` can no longer say.

        Returns:
            Its status view (how it ended, its path; ``problem`` says why it is read from the
            export) and its whole trail.

        Raises:
            RunNotFound: It exported no trail either (no run has this id).
        """
        return await status_views.gone_view(self._core, self.run_id)

    async def forks(self) -> list[dict[str, Any]]:
        """The forks started from this run (`fork`), oldest id first.

        Returns:
            One entry per fork: ``forkId``, ``fromNode``, ``set`` (the names of the variables
            corrected) and ``by``.
        """
        return await asyncio.to_thread(forks.forks_of, self._core.artifacts, self.run_id)

    async def verify_trail(self) -> TrailVerification:
        """Check the ended run's exported trail: its hash chain and, if the run still answers, its content.

        Returns:
            ``ok``, the number of lines, the first problem found, and whether the content was
            compared with the run's own trail.

        Raises:
            DsmoError: The run exported no trail (it is written when the run ends), or retention removed it.
        """
        return await run_trails.verify_trail(self._core, self.run_id)

    async def export(self, *, children: bool = False) -> RunExport:
        """The run as one archive anyone can check offline (`dsmo.verify_archive`).

        Args:
            children: Include the runs it started (``trigger_agent``), and theirs.

        Returns:
            The zip (trail, Temporal history, definition snapshots, every stored object still
            readable, the erasure records that touch it, and a manifest of SHA-256 sums), the
            manifest's own SHA-256, the runs it holds and what could not be included.

        Raises:
            DsmoError: The run exported no trail and does not answer (or does not exist).
        """
        return await run_export.export_run(self._core, self.run_id, children=children)

    # -- changing -----------------------------------------------------------------------------

    async def cancel(self, *, reason: str, by: str = "user") -> None:
        """Cancel the run in any state that has not ended (``pending`` included); its saga is undone.

        Args:
            reason: Why, recorded as ``cancelReason``.
            by: Who, recorded as ``cancelledBy``.

        Raises:
            DsmoError: ``reason`` is empty or blank; nothing was asked of the run.
            RunClosed: The run has ended already.
            RunNotFound: No run has this id.
        """
        await run_requests.cancel(self._core, self.run_id, reason=reason, by=by)

    async def deliver(self, event_type: str, data: dict[str, Any], *, event_id: str | None = None) -> EventAck:
        """Deliver a resume event through the run's validated `deliver_event` update.

        Args:
            event_type: One of the resume event kinds (``MESSAGE_RECEIVED``, ``DOCUMENT_UPLOADED``, ...).
            data: The event's data.
            event_id: Deduplication id (a random one if omitted); the same id again is a duplicate.

        Returns:
            Whether it was applied, kept for a wait ahead or a duplicate, and the run's status.

        Raises:
            EventMalformed: The event is not well formed; it was not sent.
            EventNotAccepted: The run refused it; nothing was written to its history.
            RunClosed: The run has ended.
            RunNotFound: No run has this id.
            WorkflowTaskFailing: The run's workflow task keeps failing, so it cannot take the
                event now (said within seconds, naming the failure).
        """
        return await run_requests.deliver_event(self._core, self.run_id, event_type, data, event_id=event_id)

    async def respond(self, text: str, *, event_id: str | None = None) -> EventAck:
        """Deliver a person's reply (``MESSAGE_RECEIVED``) to the run waiting for a response.

        Args:
            text: The reply.
            event_id: Deduplication id; the same id again is acknowledged as a duplicate.

        Returns:
            What became of the event.

        Raises:
            EventNotAccepted: The run is not waiting for a response.
        """
        return await run_requests.respond(self._core, self.run_id, text, event_id=event_id)

    async def decide(
        self,
        decision: str,
        *,
        arguments: dict[str, Any] | None = None,
        reason: str | None = None,
        by: str | None = None,
        call_id: str | None = None,
        call: str | None = None,
        event_id: str | None = None,
    ) -> EventAck:
        """Decide the tool call the run waits on for approval (``TOOL_DECIDED``; ``waitingFor: approval``).

        Args:
            decision: ``approve`` (make the call as the model asked), ``edit`` (make it with
                ``arguments``) or ``reject`` (make no call; the model reads ``reason``).
            arguments: With ``edit``: the call's arguments, held to the tool's schema.
            reason: Why, recorded in the trail (and, for a rejection, what the model reads).
            by: Who decides, recorded in the trail.
            call_id: The model's id of the call decided (``waitingData.callId``; turns may reuse it).
            call: The run's name of the call decided (``waitingData.call``, unique in the run): a
                decision meant for another call (a stale page) is refused instead of deciding the
                one waiting now.
            event_id: Deduplication id; the same id again is acknowledged as a duplicate.

        Returns:
            What became of the decision.

        Raises:
            EventMalformed: Not a decision (an unknown one, ``edit`` without arguments).
            EventNotAccepted: The run is not waiting for this decision (no approval, another call,
                edited arguments that break the tool's schema).
        """
        return await run_requests.decide(
            self._core,
            self.run_id,
            decision,
            arguments=arguments,
            reason=reason,
            by=by,
            call_id=call_id,
            call=call,
            event_id=event_id,
        )

    async def decide_budget(
        self,
        decision: str,
        *,
        tokens: int | None = None,
        cost_usd: float | None = None,
        model_calls: int | None = None,
        reason: str | None = None,
        by: str | None = None,
        event_id: str | None = None,
    ) -> EventAck:
        """Raise the spent budget the run waits on, or stop it (``BUDGET_DECIDED``; ``waitingFor: budget``).

        Args:
            decision: ``raise`` (the run asks its model again, within the new limits) or ``stop``
                (the run goes where a spent budget goes: ``onBudget``, else the fail-safe route).
            tokens: With ``raise``: the new token limit (it replaces the budget's).
            cost_usd: With ``raise``: the new limit in US dollars.
            model_calls: With ``raise``: the new limit of model calls.
            reason: Why, recorded in the trail.
            by: Who decides, recorded in the trail.
            event_id: Deduplication id; the same id again is acknowledged as a duplicate.

        Returns:
            What became of the decision.

        Raises:
            EventMalformed: Not a decision (``raise`` without a limit, ``stop`` with one).
            EventNotAccepted: The run is not waiting for a budget, or a raised limit is not above
                what was spent.
        """
        return await run_requests.decide_budget(
            self._core,
            self.run_id,
            decision,
            tokens=tokens,
            cost_usd=cost_usd,
            model_calls=model_calls,
            reason=reason,
            by=by,
            event_id=event_id,
        )

    async def signal(self, event_type: str, payload: dict[str, Any]) -> None:
        """Send a resume event as a Temporal signal: fire-and-forget, no answer.

        The run records the event as applied, duplicate or rejected (`EVENT_REJECTED`). Prefer
        `deliver`, which answers; signals are what other Temporal clients can send.

        Args:
            event_type: One of the resume event kinds (the signal's name).
            payload: The event's data, with its ``event_id`` (required: the run deduplicates by it).

        Raises:
            EventMalformed: The event is not well formed; it is refused before it reaches the run.
            RunNotFound: No run has this id.
        """
        await run_requests.signal_event(self._core, self.run_id, event_type, payload)

    async def rewind(
        self,
        to_node: str,
        *,
        reason: str,
        set_variables: Mapping[str, Any] | None = None,
        compensate: bool = True,
        by: str = "user",
    ) -> RewindAck:
        """Send the waiting run back to ``to_node`` .

        Args:
            to_node: A node the run passed.
            reason: Why, recorded in the trail.
            set_variables: Corrections applied where it goes back to.
            compensate: Undo the saga steps done since ``to_node``.
            by: Who asked.

        Returns:
            The run's answer: where it goes back to and what it undoes.
        """
        return await rewinds.rewind(
            self._core,
            self._core.artifacts,
            self.run_id,
            to_node,
            reason=reason,
            set_variables=set_variables,
            compensate=compensate,
            by=by,
        )

    async def fork(
        self,
        from_node: str,
        *,
        set_variables: Mapping[str, Any] | None = None,
        to: AgentDefinition | str | None = None,
        node_map: Mapping[str, str] | None = None,
        task_queue: str | None = None,
        new_id: str | None = None,
        reason: str = "",
        by: str = "user",
    ) -> RunHandle:
        """Start a new linked run that redoes this one from ``from_node``, keeping what happened before.

        Up to ``from_node`` the fork takes the original's record (committed stage outputs, the
        events its waits took, saga outcomes; no agent called, nothing sent); from there on it runs
        live, with ``set_variables`` applied. The original may have ended or still be running; it
        is not touched. The fork's trail says what it forks (`RUN_CREATED` ``forkOf`` and `RUN_FORKED`).

        Args:
            from_node: The node the fork runs live from (one on the original's path).
            set_variables: Corrections set when the fork reaches ``from_node``.
            to: Fork onto another published version (hash or label, or a definition), moving
                there as `migrate` moves a run.
            node_map: With ``to``: node ids of the original's version -> the target's.
            task_queue: The fork's task queue (default: the settings').
            new_id: The fork's run id (default: ``<root>.fork-<random>``; the root is the run's id
                without the suffixes of earlier forks, replays and what-ifs).
            reason: Why, recorded with a move to ``to``.
            by: Who asked, recorded with a move to ``to``.

        Returns:
            The fork's handle.

        Raises:
            DsmoError: ``from_node`` is not a node the original reached, the original has no
                config snapshot, or the move to ``to`` is refused (named by its option).
            DefinitionNotFound: ``to`` is not a published version of the run's agent.
            RunNotFound: No run has this id.
        """
        fork_id = await forks.fork(
            self._core,
            self._core.artifacts,
            self.run_id,
            from_node,
            set_variables=set_variables,
            to=to,
            node_map=node_map,
            task_queue=task_queue,
            new_id=new_id,
            reason=reason,
            by=by,
        )
        return RunHandle(self._core, fork_id)

    async def migrate(
        self,
        to: AgentDefinition | str,
        *,
        node_map: Mapping[str, str] | None = None,
        leave_wait: bool = False,
        restart_timers: bool = False,
        set_variables: Mapping[str, Any] | None = None,
        reason: str = "",
        by: str = "user",
        dry_run: bool = False,
    ) -> MigrationAck:
        """Move the run to another published version of its agent, checked by the run first.

        A waiting run moves at once and goes on waiting at the mapped node; a run inside a stage
        moves at its next node boundary (this call returns once it is decided there).

        Args:
            to: The target version: a published definition, or its hash or ``version`` label.
            node_map: Node ids of the run's version -> the target's, for renamed nodes.
            leave_wait: Let a waiting run leave its wait when the mapped node waits for
                something else (the mapped node then runs from its beginning).
            restart_timers: The wait's timeout starts afresh instead of keeping its deadline.
            set_variables: Variables to set as the run moves (one the target reads, a fix).
            reason: Why, recorded in the run's trail (`RUN_MIGRATED`).
            by: Who asked, recorded beside the reason.
            dry_run: Only check: ask nothing of the run but where it is.

        Returns:
            Where the run goes on: the versions, the node it was at and the one it goes on at.

        Raises:
            AlreadyOnTarget: The run follows ``to`` already (nothing moved).
            MigrationNotAccepted: The move was refused; the one-line reason names the field.
            DefinitionNotFound: ``to`` is not a published version of the run's agent.
            RunClosed: The run has ended.
            RunNotFound: No run has this id.
        """
        return await migration.migrate_run(
            self._core,
            self.run_id,
            to,
            node_map=node_map,
            leave_wait=leave_wait,
            restart_timers=restart_timers,
            set_variables=set_variables,
            reason=reason,
            by=by,
            dry_run=dry_run,
        )

    async def replay(
        self,
        *,
        from_stage: str | None = None,
        task_queue: str | None = None,
        new_id: str | None = None,
        rerun_llm: bool = False,
    ) -> ReplayReport:
        """Re-execute the ended run as a new linked run (same input, version, config); compare the paths.

        `llm` stages answer from the original's recorded responses, so a replay calls no model
        unless ``rerun_llm``. Waits for the replay to end (a worker must run it).

        Args:
            from_stage: Reuse the original's committed outputs before this node; recompute from it on.
            task_queue: The replay's task queue (default: the settings').
            new_id: The replay's run id (default: ``<run_id>.replay-<random>``).
            rerun_llm: Call the models again and report the answers that changed.

        Returns:
            Both paths, both end statuses, the first divergence and each stage's output digests.

        Raises:
            RunNotFound: No run has this id.
            DsmoError: The run has not ended, was erased, has no config snapshot, or never
                reached ``from_stage``.
        """
        return await replay.replay_run(
            self._core, self.run_id, from_stage=from_stage, task_queue=task_queue, new_id=new_id, rerun_llm=rerun_llm
        )

    async def verify_history(self) -> str | None:
        """Replay the run's Temporal history on this process's workflow code: is it still deterministic?

        Returns:
            None if it replays, else what diverged.

        Raises:
            RunNotFound: No run has this id.
        """
        return await history_check.verify_history(self._core, self.run_id)


class StartedRun(RunHandle):
    """The handle `DsmoClient.start` returns: the run, and what became of the start.

    Attributes:
        started: What flow control did with the start: ``running`` or ``pending`` (the key it
            waits in line for, behind how many runs; the runs cancelled to make room), or
            ``delivered`` (the key's active run took the start's events: this handle is that
            run's), or ``debounced`` (it joined its key's batch, whose run this is).

    Args:
        core: The client's core, which the handle asks through.
        started: The start's report.
    """

    def __init__(self, core: ClientCore, started: StartReport) -> None:
        super().__init__(core, started.run_id)
        self.started = started

    async def result(self) -> ExecutionResult:
        """Wait for the run to end (see `RunHandle.result`).

        A ``debounced`` start's run does not exist until its batch is quiet and its debouncer
        starts it: this waits for that first, however long the batch gathers.

        Returns:
            The run's final status, variables, path and outcome.

        Raises:
            WorkflowTaskFailing: The run's workflow task keeps failing.
            RunNotFound: No run has this id; for a debounced start, its debouncer ended and the
                run still does not exist (it was never started).
        """
        debouncer = self.started.debouncer if self.started.status == "debounced" else None
        while debouncer is not None:
            try:
                return await super().result()
            except RunNotFound:
                if not await self._still_gathering(debouncer):
                    break  # one last look below: it may have started the run as it ended
            await asyncio.sleep(DEBOUNCED_POLL_SECONDS)
        try:
            return await super().result()
        except RunNotFound:
            if debouncer is None:
                raise
            raise RunNotFound(
                f"run {self.run_id!r} was never started: its batch's debouncer ({debouncer}) has ended"
            ) from None

    async def _still_gathering(self, debouncer: str) -> bool:
        try:
            described = await self._core.temporal.get_workflow_handle(debouncer).describe()
        except RPCError:
            return False  # gone (or unreachable: the last look says which)
        return described.close_time is None
