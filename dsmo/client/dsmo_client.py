"""`DsmoClient`: the Python API's entry point, shaped like Temporal's client.

Longer than most modules because the class is the public API's index (a class stays in one module),
yet it holds no logic: each method calls a function over its `ClientCore` in a capability's module
(`starts`, `run_status`, `run_requests`, `replay`, ...), which never depends on it. Calls about one
run are documented on `RunHandle`; the ``run_id``-first ones here are shortcuts to the same calls.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.erasure_log import ErasureLog
from dsmo.client import (
    batches,
    bulk_operations,
    compensations,
    definitions_client,
    erasure,
    forks,
    history_check,
    migration,
    monitoring,
    redrive,
    replay,
    rewinds,
    run_export,
    run_requests,
    run_status,
    run_stream,
    run_trails,
    starts,
    trail_pages,
    what_if,
)
from dsmo.client.batches import BatchReport
from dsmo.client.connection import connect_temporal
from dsmo.client.core import ClientCore
from dsmo.client.definitions_client import Definitions
from dsmo.client.flow_starts import StartReport
from dsmo.client.hooks_client import Hooks
from dsmo.client.monitoring import RunSummary
from dsmo.client.redrive import DeadLetterRow
from dsmo.client.replay import ReplayReport
from dsmo.client.run_handle import RunHandle, StartedRun
from dsmo.client.run_selection import Scope, current_rows
from dsmo.client.run_stream import StreamItem
from dsmo.client.trail_store import TrailVerification, verify_export
from dsmo.config.settings import Settings
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.migration_io import MigrationAck
from dsmo.workflows.contracts.rewind_io import RewindAck
from dsmo.workflows.contracts.run_records import AuditEvent, ExecutionRequest, ExecutionResult, StatusView, TrailView
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.events.resume_events import EventAck
from dsmo.workflows.saga.compensation_retry import CompensationRetryState

_RENAMED = "DsmoClient.{} is deprecated: DsmoClient.start takes the same options and returns the run's handle"


class DsmoClient:
    """Publish definitions; start, list, follow, resume, replay and cancel agent runs.

    Build one with `DsmoClient.connect()`. Failures DSMO can name raise a `DsmoError` subclass
    (`dsmo.errors`) with a one-line message; each method's Raises says which.

    Args:
        client: A connected Temporal client.
        settings: Where Temporal and the object store are.
        prepare_runs: Write a run's input and config snapshot at its start (False: its workflow does).
    """

    def __init__(self, client: Client, settings: Settings, *, prepare_runs: bool = True) -> None:
        self._core = ClientCore(client, settings, prepare_runs=prepare_runs)

    @classmethod
    async def connect(cls, settings: Settings | None = None, *, lazy: bool = False) -> DsmoClient:
        """Connect to Temporal.

        Args:
            settings: Where Temporal and the object store are; `Settings.from_env()` if omitted.
            lazy: Connect on the first call that needs Temporal instead of now, so work that needs
                only the store (publishing, reading definitions) runs while Temporal is down.

        Returns:
            A connected client.

        Raises:
            TemporalUnavailable: Temporal cannot be reached (or ``SettingsError``: a setting is invalid).
        """
        settings = settings or Settings.from_env()
        return cls(await connect_temporal(settings, lazy=lazy), settings)

    @property
    def temporal(self) -> Client:
        """The Temporal client underneath (for what DSMO does not wrap)."""
        return self._core.temporal

    @property
    def settings(self) -> Settings:
        """The settings this client was built with."""
        return self._core.settings

    @property
    def core(self) -> ClientCore:
        """The state the client's capability functions (`dsmo.client.*`) take, for what this class does not wrap."""
        return self._core

    @property
    def artifacts(self) -> ArtifactStore:
        """The artifact store this client reads (and writes run inputs to), with the subjects' keys."""
        return self._core.artifacts

    # -- starting and reaching runs -----------------------------------------------------------

    async def start(
        self,
        agent_or_definition: str | AgentDefinition | ExecutionRequest,
        input: dict[str, Any] | None = None,
        *,
        version: str | None = None,
        run_id: str | None = None,
        task_queue: str | None = None,
        correlation_id: str | None = None,
        start_delay: timedelta | None = None,
        history_limit: int | None = None,
        events: Sequence[Mapping[str, Any]] = (),
        priority: int | None = None,
        memo: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> StartedRun:
        """Start a run. Run ids are never reused, even after a run has ended.

        Args:
            agent_or_definition: The name of an agent whose published definition to run (its
                latest version, or ``version``); a definition (see `load_definition`); or a
                complete `ExecutionRequest` (how redrives and replays set where a run starts),
                which carries its own input and options.
            input: The run's input document (checked against the definition's limits).
            version: With an agent name: the published ``workflow_version`` to run.
            run_id: The run's id (default: ``<agent>-<random>``).
            task_queue: The workers' task queue (default: the settings').
            correlation_id: A caller's id kept with the run (for example a ticket number).
            start_delay: Keep the run ``pending`` until then; it can be cancelled meanwhile.
            history_limit: Continue as new after this many history events (default: the definition's).
            events: Resume events delivered with the start, in order, each as ``{"type", "data",
                "event_id"?}``; the first in the same call (update-with-start), so it cannot race
                the run. Each is kept in the run's inbox for the wait that takes it.
            priority: 1 (highest) to 5: the run's tasks go ahead of lower ones on the workers' task
                queue (none counts as 3), and ahead of them in a concurrency key's line.
            memo: Kept in the run's Temporal memo (the ingress keeps which start made the run).
            idempotency_key: For a debounced definition (whose starts take no ``run_id``): a
                start sent again with the same key while its key value's debouncer runs joins
                the batch once and is told the same run. Other starts name their run instead.

        Returns:
            The run's handle; its ``started`` says what flow control did (runs at once, waits in
            line behind which key, cancelled runs to make room, or ``delivered`` to the key's run).

        Raises:
            InvalidInputDocument: ``input`` is too large, too deep or not JSON, or lacks a value a
                concurrency key or the data subject reads.
            RunAlreadyExists: A run with ``run_id`` exists or existed.
            InvalidRunId: ``run_id`` is not a valid run id.
            EventNotAccepted: An event is malformed or no wait of the definition takes it (the run
                is not started).
            DefinitionNotFound: No definition is published under the agent name (or no such version).
            KeyBusy: A concurrency key of the run is busy and says ``onBusy: reject``; nothing started.
            ValueError: An option the first argument does not take (``version`` with a definition,
                ``input`` with a request, ``idempotency_key`` for a start that is not debounced, ...).
        """
        report = await starts.start(
            self._core,
            agent_or_definition,
            input,
            version=version,
            run_id=run_id,
            task_queue=task_queue,
            correlation_id=correlation_id,
            start_delay=start_delay,
            history_limit=history_limit,
            events=events,
            priority=priority,
            memo=memo,
            idempotency_key=idempotency_key,
        )
        return StartedRun(self._core, report)

    async def submit(self, agent_or_definition: str | AgentDefinition, input: Any = None, **kw: Any) -> StartReport:
        """Deprecated (one release): the ``started`` report of `DsmoClient.start`."""
        warnings.warn(_RENAMED.format("submit"), DeprecationWarning, stacklevel=2)
        return await starts.start(self._core, agent_or_definition, input, **kw)

    async def start_request(self, request: ExecutionRequest, /, **options: Any) -> str:
        """Deprecated (one release): the ``run_id`` of `DsmoClient.start`."""
        warnings.warn(_RENAMED.format("start_request"), DeprecationWarning, stacklevel=2)
        return (await starts.start(self._core, request, **options)).run_id

    async def submit_request(self, request: ExecutionRequest, /, **options: Any) -> StartReport:
        """Deprecated (one release): the ``started`` report of `DsmoClient.start`."""
        warnings.warn(_RENAMED.format("submit_request"), DeprecationWarning, stacklevel=2)
        return await starts.start(self._core, request, **options)

    def run(self, run_id: str) -> RunHandle:
        """A handle on the run ``run_id`` (no call is made until one of its methods is).

        Args:
            run_id: The run's id.

        Returns:
            Its handle: status, events, result, cancel, deliver, respond, rewind, fork, migrate, ...
        """
        return RunHandle(self._core, run_id)

    # -- one run, by id (each is documented on `RunHandle`) -------------------------------------

    async def status(self, run_id: str) -> StatusView:
        """The run's status now: `RunHandle.status`."""
        return await run_status.status(self._core, run_id)

    async def result(self, run_id: str) -> ExecutionResult:
        """Wait for the run to end; its terminal record: `RunHandle.result`."""
        return await run_status.result(self._core, run_id)

    async def wait_for_status(
        self, run_id: str, statuses: set[RunStatus], *, timeout: float = 30.0, interval: float = 0.1
    ) -> StatusView:
        """Poll until the run's status is one of ``statuses``: `RunHandle.wait_for_status`."""
        return await run_status.wait_for_status(self._core, run_id, statuses, timeout=timeout, interval=interval)

    async def variables(self, run_id: str) -> dict[str, Any]:
        """The run's variables now: `RunHandle.variables`."""
        return await run_status.variables(self._core, run_id)

    async def events(self, run_id: str, *, live: bool = False) -> list[AuditEvent]:
        """The run's audit trail: `RunHandle.events`."""
        return await run_trails.events(self._core, run_id, live=live)

    def stream(self, run_id: str, *, after: str | None = None) -> AsyncIterator[StreamItem]:
        """The run's live stream, resumable after an item's id: `RunHandle.stream`."""
        return run_stream.follow(self._core, run_id, after=after)

    async def trail(self, run_id: str) -> TrailView:
        """The run's trail head and the events after it: `RunHandle.trail`."""
        return await run_trails.trail(self._core, run_id)

    async def events_page(
        self,
        run_id: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int = trail_pages.DEFAULT_LIMIT,
        live: bool = False,
    ) -> trail_pages.TrailPage:
        """One page of the run's trail: `RunHandle.events_page`."""
        return await trail_pages.trail_page(self._core, run_id, after=after, before=before, limit=limit, live=live)

    def event_pages(
        self, run_id: str, *, after: int = 0, limit: int = trail_pages.MAX_LIMIT, live: bool = False
    ) -> AsyncIterator[trail_pages.TrailPage]:
        """Every page of the run's trail from ``after``: `RunHandle.event_pages`."""
        return trail_pages.trail_pages(self._core, run_id, after=after, limit=limit, live=live)

    async def verify_trail(self, run_id: str) -> TrailVerification:
        """Check the run's exported trail: `RunHandle.verify_trail`."""
        return await run_trails.verify_trail(self._core, run_id)

    async def verify_history(self, run_id: str) -> str | None:
        """Replay the run's Temporal history on this code; None if deterministic: `RunHandle.verify_history`."""
        return await history_check.verify_history(self._core, run_id)

    async def export(self, run_id: str, *, children: bool = False) -> run_export.RunExport:
        """The run as one archive anyone can check offline: `RunHandle.export`."""
        return await run_export.export_run(self._core, run_id, children=children)

    async def cancel(self, run_id: str, *, reason: str, by: str = "user") -> None:
        """Cancel the run; who and why are recorded: `RunHandle.cancel`."""
        await run_requests.cancel(self._core, run_id, reason=reason, by=by)

    async def deliver_event(
        self, run_id: str, event_type: str, data: dict[str, Any], *, event_id: str | None = None
    ) -> EventAck:
        """Deliver a resume event through the run's validated update: `RunHandle.deliver`."""
        return await run_requests.deliver_event(self._core, run_id, event_type, data, event_id=event_id)

    async def respond(self, run_id: str, text: str, *, event_id: str | None = None) -> EventAck:
        """Deliver a person's reply (`MESSAGE_RECEIVED`): `RunHandle.respond`."""
        return await run_requests.respond(self._core, run_id, text, event_id=event_id)

    async def signal_event(self, run_id: str, event_type: str, payload: dict[str, Any]) -> None:
        """Send a resume event as a fire-and-forget Temporal signal: `RunHandle.signal`."""
        await run_requests.signal_event(self._core, run_id, event_type, payload)

    async def rewind(self, run_id: str, to_node: str, *, reason: str, **options: Any) -> RewindAck:
        """Send the waiting run back to an earlier node, with corrections: `RunHandle.rewind`."""
        return await rewinds.rewind(self._core, self._core.artifacts, run_id, to_node, reason=reason, **options)

    async def fork(self, run_id: str, from_node: str, **options: Any) -> str:
        """Start a linked run that redoes the run from ``from_node``; its id: `RunHandle.fork`."""
        return await forks.fork(self._core, self._core.artifacts, run_id, from_node, **options)

    async def forks(self, run_id: str) -> list[dict[str, Any]]:
        """The forks started from the run, oldest first: `RunHandle.forks`."""
        return await asyncio.to_thread(forks.forks_of, self._core.artifacts, run_id)

    async def migrate_run(self, run_id: str, to: AgentDefinition | str, **options: Any) -> MigrationAck:
        """Move the run to another published version of its agent: `RunHandle.migrate`."""
        return await migration.migrate_run(self._core, run_id, to, **options)

    async def replay(self, run_id: str, **options: Any) -> ReplayReport:
        """Re-execute the ended run as a new linked run and compare: `RunHandle.replay`."""
        return await replay.replay_run(self._core, run_id, **options)

    # -- published definitions --------------------------------------------------------------

    @property
    def definitions(self) -> Definitions:
        """The published definitions: ``await client.definitions()`` lists them, and
        ``client.definitions.publish(...)`` publishes one, checking the workers offer what it names."""
        return Definitions(self._core)

    @property
    def hooks(self) -> Hooks:
        """Webhook subscriptions: ``await client.hooks()`` lists them, ``client.hooks.add(...)`` makes one."""
        return Hooks(self._core)

    async def publish(self, definition: AgentDefinition) -> str:
        """Publish with no check that workers offer what it names; the snapshot's URI: `Definitions.publish`."""
        return await definitions_client.publish_unchecked(self._core, definition)

    async def definition(self, agent: str, version: str | None = None) -> AgentDefinition:
        """A published definition of ``agent`` (a version by hash or label; default: its latest): `Definitions.get`."""
        return await definitions_client.definition(self._core, agent, version)

    async def versions(self, agent: str) -> list[str]:
        """The published versions of ``agent``, oldest first: `Definitions.versions`."""
        return await definitions_client.versions(self._core, agent)

    # -- many runs ----------------------------------------------------------------------------

    async def runs(
        self,
        query: str | None = None,
        *,
        status: str | None = None,
        agent: str | None = None,
        waiting_for: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[RunSummary]:
        """The runs visibility knows, newest first, each once as it is now, with what each waits for.

        Args:
            query: A Temporal visibility query AND-ed with the filters (for example
                ``"StartTime > '2026-01-01T00:00:00Z'"``).
            status: Only runs in this status (`waiting`, `completed`, ...).
            agent: Only runs of this agent.
            waiting_for: Only runs waiting for this (`response`, `document`, `event`, ...).
            limit: At most this many.

        Yields:
            One `RunSummary` per run (use ``async for``).

        Raises:
            ValueError: ``status``, ``agent`` or ``waiting_for`` is not a valid value (named).
            DsmoError: Temporal refused the query (its message says why), or cannot be reached.
        """
        selection = monitoring.runs_selection(query, status=status, agent=agent, waiting_for=waiting_for)
        async for execution in current_rows(self._core.temporal, selection, limit=limit):
            yield monitoring.run_summary(execution)

    async def count_runs(self, query: str, *, scope: str | None = None, runs: Scope = Scope.ANY) -> int | None:
        """How many runs a visibility filter selects now, each once (for a progress bar).

        Args:
            query: A Temporal visibility filter.
            scope: A filter AND-ed to it (a batch's own selection).
            runs: Which runs count: any, or only open ones.

        Returns:
            The count; None if Temporal cannot count it.
        """
        return await batches.count_runs(self._core, query, scope=scope, runs=runs)

    async def bulk_cancel(self, query: str, *, reason: str, by: str = "user", **batch: Any) -> BatchReport:
        """Cancel every run a visibility filter selects, each as `cancel` would.

        Args:
            query: A Temporal visibility filter (AND-ed with ``WorkflowType='AgentExecution'``).
            reason: Why, recorded in each run as `cancelReason`.
            by: Who, recorded as `cancelledBy`.
            **batch: ``dry_run`` (send nothing; report ``would``), ``rate`` (runs a second),
                ``limit`` (runs at most), ``on_outcome`` (called with each run's outcome),
                ``runs`` (`Scope.OPEN`: only runs still open, ended ones left out of the batch).

        Returns:
            One outcome per run: ``done`` (cancel requested; the run unwinds on its own),
            ``skipped`` (already ended, or a cancel was requested before), ``would`` or ``failed``.

        Raises:
            DsmoError: ``reason`` is empty or blank; no run was touched.
            InvalidQuery: The filter is empty, or Temporal refused it; no run was touched.
        """
        return await bulk_operations.bulk_cancel(self._core, query, reason=reason, by=by, **batch)

    async def bulk_redrive(self, query: str, **batch: Any) -> BatchReport:
        """Redrive the dead letters of every failed run a visibility filter selects (see `redrive`).

        Args:
            query: A Temporal visibility filter; only the failed runs it selects are taken.
            **batch: As for `bulk_cancel`.

        Returns:
            One outcome per failed run: ``done`` (``detail["redrivenAs"]`` names the new runs),
            ``skipped`` (no dead letter, or already redriven: named), ``would`` or ``failed``.

        Raises:
            InvalidQuery: The filter is empty, or Temporal refused it; no run was touched.
        """
        return await bulk_operations.bulk_redrive(self._core, query, **batch)

    async def bulk_deliver(
        self, query: str, event_type: str, data: dict[str, Any], *, batch_id: str, **batch: Any
    ) -> BatchReport:
        """Deliver one resume event to every run a visibility filter selects, each as `deliver_event` would.

        Args:
            query: A Temporal visibility filter (AND-ed with ``WorkflowType='AgentExecution'``).
            event_type: The resume event kind (`EVENT_COMPLETED`, `MESSAGE_RECEIVED`, ...).
            data: The event's data, the same for every run.
            batch_id: The batch's id: the same id again is the same batch (each run takes it once).
            **batch: As for `bulk_cancel` (``dry_run`` reports the open runs that have not taken it).

        Returns:
            One outcome per run: ``done`` (taken or kept), ``skipped``, ``refused``, ``would`` or ``failed``.

        Raises:
            EventMalformed: The event is not well formed; nothing was sent to any run.
            InvalidQuery: The filter is empty, or Temporal refused it; no run was touched.
        """
        return await bulk_operations.bulk_deliver(self._core, query, event_type, data, batch_id=batch_id, **batch)

    async def migrate(self, agent: str, to: AgentDefinition | str, **options: Any) -> BatchReport:
        """Move every open run of ``agent`` a selection takes to another published version.

        Each run is moved as `RunHandle.migrate` moves one, checked by the run itself. Running
        the same batch again moves nothing twice: runs already on the target are ``skipped``.

        Args:
            agent: The agent whose open runs move.
            to: The target version: a published definition, or its hash or ``version`` label.
            **options: ``from_version`` (only runs on it), ``query`` (a visibility filter AND-ed
                to the selection), the move's ``node_map``, ``leave_wait``, ``restart_timers``,
                ``set_variables``, ``reason`` and ``by`` (see `RunHandle.migrate`), the batch's
                ``dry_run``, ``rate``, ``limit``, ``concurrency`` and ``on_outcome``, and
                ``publish`` (``to`` is a definition to publish once the batch's arguments are checked).

        Returns:
            Each run's outcome (``done``, ``would``, ``skipped``, ``refused``, ``failed``) and a
            summary, refusals counted by reason (``to_json()`` for the file).

        Raises:
            DefinitionNotFound: ``to`` or ``from_version`` is not a published version of ``agent``.
            InvalidQuery: The filter is empty, or Temporal refused it; no run was touched.
        """
        return await migration.migrate_agent(self._core, agent, to, **options)

    async def what_if(self, query: str, candidate: AgentDefinition, **options: Any) -> what_if.WhatIfReport:
        """Replay recorded runs against a candidate version: what would it have done with them?

        Each ended run of the candidate's agent that ``query`` selects is replayed as a new
        linked run following ``candidate``: its waits take the recorded events, `llm` stages the
        recorded answers (no model call unless ``rerun_llm``), stages with an unchanged agent
        reuse their outputs, and nothing is sent to anyone.

        Args:
            query: A Temporal visibility filter (AND-ed with the agent and ``ended``).
            candidate: The version to try (published or not).
            **options: ``rerun_llm`` (ask the models again), ``limit`` (runs at most),
                ``task_queue`` (the replays'), ``concurrency`` (replays in flight, default 10) and
                ``on_run`` (called with each run's outcome as it is known).

        Returns:
            Per run: same path or where it first diverged, and both end statuses; a summary.

        Raises:
            InvalidQuery: The filter is empty, or Temporal refused it; nothing was replayed.
        """
        return await what_if.what_if(self._core, self._core.artifacts, query, candidate, **options)

    # -- recovery and monitoring ----------------------------------------------------------------

    async def dead_letters(self, *, run_id: str | None = None) -> list[DeadLetterRow]:
        """The dead letters (stages that could not succeed), oldest first, with what redrove each.

        Args:
            run_id: Only this run's (default: every run's).

        Returns:
            One row per dead letter: its id (``RUN/STAGE``), error type, attempts, when, and the
            run that redrove it, if any.
        """
        return await redrive.dead_letters(self._core, run_id=run_id)

    async def redrive(self, letter_id: str, *, task_queue: str | None = None, new_id: str | None = None) -> str:
        """Reprocess a dead letter from its failed stage as a new linked run (same version, config, variables).

        Args:
            letter_id: ``RUN/STAGE``, as `dead_letters` lists it.
            task_queue: The new run's task queue (default: the failed run's).
            new_id: The new run's id (default: ``RUN.redrive-<random>``). If a redrive of the
                letter's run exists under this id, it is taken as this letter's (an earlier
                attempt interrupted before it marked the letter): the letter is marked and
                nothing is started.

        Returns:
            The new run's id.

        Raises:
            ReplayLetterRefused: The letter's run is a replay or what-if: nothing is started.
            AlreadyRedriven: The letter was redriven already, as another run than ``new_id``
                that is running or completed: nothing is started (one that failed, timed out or
                was cancelled may be redriven again).
            RunAlreadyExists: ``new_id`` is taken by a run that is not a redrive of the letter's
                run (or kept by its trail): nothing is started or marked.
            DsmoError: No such dead letter, its config snapshot is of another version, or
                whether the run under ``new_id`` is such a redrive cannot be told now.
        """
        return await redrive.redrive(self._core, self._core.artifacts, letter_id, task_queue=task_queue, new_id=new_id)

    async def failed_compensations(self, *, limit: int = 1000) -> list[compensations.FailedCompensation]:
        """Saga compensations whose retries ran out, waiting for a person (no worker needed).

        Args:
            limit: At most this many.

        Returns:
            One row per compensation, by id: its run, node, action, attempts and last error.
        """
        return await compensations.failed(self._core, limit)

    async def retry_compensation(
        self, compensation_id: str, *, task_queue: str | None = None
    ) -> CompensationRetryState:
        """One more attempt at a failed compensation, now, under the same key (so it applies once).

        Args:
            compensation_id: The id `failed_compensations` lists.
            task_queue: The workers' task queue (default: the settings').

        Returns:
            How the attempt ended (succeeded, or failed again with its error).

        Raises:
            DsmoError: No failed compensation has this id.
        """
        return await compensations.retry(self._core, compensation_id, task_queue=task_queue)

    async def run_counts(self) -> list[monitoring.StatusCount]:
        """How many runs are active in each status now (`dsmo runs stats`).

        Returns:
            One row per status: its count and the runs' average age.
        """
        return await monitoring.stats(self._core.temporal)

    async def waiting_runs(self) -> list[monitoring.WaitingRun]:
        """The runs waiting now, the nearest deadline first (`dsmo runs waiting`).

        Returns:
            One row per run: what it waits for, until when, and its age.
        """
        return await monitoring.waiting(self._core.temporal)

    async def stuck_runs(self) -> list[monitoring.WaitingRun]:
        """Runs that do not move: past their wait's deadline, or whose workflow task keeps failing.

        Returns:
            One row per run, with the problem in words (`dsmo runs stuck`).
        """
        return await monitoring.stuck(self._core.temporal)

    # -- data subjects ---------------------------------------------------------------------------

    async def erase_subject(
        self, subject: str, *, reason: str, by: str = "user", cancel_runs: bool = False, dry_run: bool = False
    ) -> erasure.ErasureReport:
        """Erase a data subject: destroy its key, delete its runs' histories, append to the erasure log.

        Args:
            subject: The subject's id, as the definition's ``subject`` renders it.
            reason: Why (kept in the erasure log).
            by: Who (kept in the erasure log, and as the cancelled runs' ``cancelledBy``).
            cancel_runs: Cancel the subject's open runs first (their sagas compensate); without
                it, open runs refuse the erasure.
            dry_run: Only list what would be erased.

        Returns:
            The subject's runs, what was cancelled and deleted, and the erasure log's new record.

        Raises:
            SubjectHasOpenRuns: The subject has open runs and ``cancel_runs`` is off.
            DsmoError: ``reason`` is empty, or ``subject`` is not a subject id.
        """
        return await erasure.erase_subject(
            self._core, subject, reason=reason, by=by, cancel_runs=cancel_runs, dry_run=dry_run
        )

    async def erasures(self) -> tuple[list[dict[str, Any]], TrailVerification]:
        """The erasure log: every record, oldest first, and the check of its hash chain.

        Returns:
            The records (with their ``seq``, ``prevHash`` and ``hash``) and the chain's verification.
        """
        body = await asyncio.to_thread(ErasureLog(self._core.artifacts).body)
        records = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        return records, verify_export(body, None, None)
