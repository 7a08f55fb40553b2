"""`RunHandle`: one run, by id, and everything that can be asked of it or done to it.

Shaped like Temporal's `WorkflowHandle`: `DsmoClient.run(run_id)` gives one without a call to
the server; each method is one question or one change. The client's `run_id`-first methods are
what each method calls, so the two always agree.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from dsmo.client import trail_pages
from dsmo.client.replay import ReplayReport
from dsmo.client.run_export import RunExport
from dsmo.client.trail_pages import TrailPage
from dsmo.client.trail_store import TrailVerification
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.migration_io import MigrationAck
from dsmo.workflows.contracts.rewind_io import RewindAck
from dsmo.workflows.contracts.run_records import AuditEvent, ExecutionResult, StatusView, TrailView
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.events.resume_events import EventAck

if TYPE_CHECKING:
    from dsmo.client.dsmo_client import DsmoClient


class RunHandle:
    """One run of an agent, by its id.

    Example:
        ```python
        run = client.run(await client.start("candidate-screening", {"candidate": {...}}))
        await run.wait_for_status({RunStatus.WAITING})
        await run.respond("Yes, still interested")
        print((await run.result()).status)
        ```

    Args:
        client: The client the handle asks through.
        run_id: The run's id.
    """

    def __init__(self, client: DsmoClient, run_id: str) -> None:
        self._client = client
        self.run_id = run_id

    def __repr__(self) -> str:
        return f"RunHandle({self.run_id!r})"

    # -- reading ------------------------------------------------------------------------------

    async def status(self) -> StatusView:
        """Where the run stands now: status, the wait it is in, its terminal record.

        Returns:
            The status view.

        Raises:
            RunNotFound: No run has this id.
        """
        return await self._client.status(self.run_id)

    async def result(self) -> ExecutionResult:
        """Wait for the run to end and return how it ended.

        Returns:
            The run's terminal record.

        Raises:
            RunNotFound: No run has this id.
        """
        return await self._client.result(self.run_id)

    async def wait_for_status(self, statuses: set[RunStatus], *, timeout: float = 30.0) -> StatusView:
        """Poll until the run's status is one of ``statuses``.

        Args:
            statuses: The statuses to wait for.
            timeout: Seconds to wait at most.

        Returns:
            The status view once it matches.

        Raises:
            TimeoutError: The run did not get there in time.
        """
        return await self._client.wait_for_status(self.run_id, statuses, timeout=timeout)

    async def events(self, *, live: bool = False) -> list[AuditEvent]:
        """The run's whole audit trail, oldest first (see `events_page` for a long one).

        Args:
            live: Ask the running workflow rather than the stored trail.

        Returns:
            The audit events.
        """
        return await self._client.events(self.run_id, live=live)

    async def events_page(
        self, *, after: int | None = None, before: int | None = None, limit: int = trail_pages.DEFAULT_LIMIT
    ) -> TrailPage:
        """One page of the trail: after or before a sequence number, or the latest events.

        Args:
            after: The page starts after this sequence number.
            before: The page ends before this sequence number.
            limit: Events on the page, 1 to 1,000.

        Returns:
            The page, with the cursors of the pages on either side.
        """
        return await self._client.events_page(self.run_id, after=after, before=before, limit=limit)

    def event_pages(self, *, after: int = 0, limit: int = trail_pages.MAX_LIMIT) -> AsyncIterator[TrailPage]:
        """Every page of the trail in turn, from ``after`` on.

        Args:
            after: Start after this sequence number.
            limit: Events per page.

        Returns:
            An iterator over the pages.
        """
        return self._client.event_pages(self.run_id, after=after, limit=limit)

    async def trail(self) -> TrailView:
        """The trail with its hash chain, as the run keeps it.

        Returns:
            The trail view.
        """
        return await self._client.trail(self.run_id)

    async def variables(self) -> dict[str, Any]:
        """The run's variables now (a running run's, or an ended run's last).

        Returns:
            Name -> value.
        """
        return await self._client.variables(self.run_id)

    async def forks(self) -> list[dict[str, Any]]:
        """The forks started from this run, oldest first.

        Returns:
            One entry per fork: ``forkId``, ``fromNode``, ``set``, ``by``.
        """
        return await self._client.forks(self.run_id)

    async def verify_trail(self) -> TrailVerification:
        """Check the run's exported trail: its hash chain, its signatures, its segments.

        Returns:
            What was checked and what failed.
        """
        return await self._client.verify_trail(self.run_id)

    async def export(self, *, children: bool = False) -> RunExport:
        """Everything the run produced, for an archive: trail, artifacts, history.

        Args:
            children: Include the runs it started.

        Returns:
            The export: where each part was written.
        """
        return await self._client.export(self.run_id, children=children)

    # -- changing -----------------------------------------------------------------------------

    async def cancel(self, *, reason: str, by: str = "user") -> None:
        """Cancel the run: its completed steps are undone, the cancel is recorded.

        Args:
            reason: Why, recorded in the trail.
            by: Who asked.
        """
        await self._client.cancel(self.run_id, reason=reason, by=by)

    async def deliver(self, event_type: str, data: dict[str, Any], *, event_id: str | None = None) -> EventAck:
        """Deliver a resume event through the run's validated update.

        Args:
            event_type: ``MESSAGE_RECEIVED``, ``DOCUMENT_UPLOADED``, ...
            data: The event's fields.
            event_id: Its idempotency id (default: a new one).

        Returns:
            The run's answer: accepted, duplicate, kept for a wait ahead.

        Raises:
            EventMalformed: The event breaks its type's rules (named).
            EventNotAccepted: The run cannot take it now (the reason is named).
        """
        return await self._client.deliver_event(self.run_id, event_type, data, event_id=event_id)

    async def respond(self, text: str, *, event_id: str | None = None) -> EventAck:
        """Deliver a person's reply (``MESSAGE_RECEIVED``).

        Args:
            text: The reply.
            event_id: Its idempotency id (default: a new one).

        Returns:
            The run's answer.
        """
        return await self._client.respond(self.run_id, text, event_id=event_id)

    async def rewind(
        self,
        to_node: str,
        *,
        reason: str,
        set_variables: Mapping[str, Any] | None = None,
        compensate: bool = True,
        by: str = "user",
    ) -> RewindAck:
        """Send the waiting run back to ``to_node`` (see `DsmoClient.rewind`).

        Args:
            to_node: A node the run passed.
            reason: Why, recorded in the trail.
            set_variables: Corrections applied where it goes back to.
            compensate: Undo the saga steps done since ``to_node``.
            by: Who asked.

        Returns:
            The run's answer: where it goes back to and what it undoes.
        """
        return await self._client.rewind(
            self.run_id, to_node, reason=reason, set_variables=set_variables, compensate=compensate, by=by
        )

    async def fork(self, from_node: str, **options: Any) -> RunHandle:
        """Start a new run that keeps what this one did before ``from_node`` and runs live from it.

        Args:
            from_node: The node the fork goes live at.
            **options: `DsmoClient.fork`'s options (``set_variables``, ``to``, ``node_map``, ...).

        Returns:
            The fork's handle.
        """
        return RunHandle(self._client, await self._client.fork(self.run_id, from_node, **options))

    async def migrate(self, to: AgentDefinition | str, **options: Any) -> MigrationAck:
        """Move the run to another published version of its agent (see `DsmoClient.migrate_run`).

        Args:
            to: The target definition, or its ``workflow_version``.
            **options: `DsmoClient.migrate_run`'s options (``node_map``, ``dry_run``, ...).

        Returns:
            The run's answer: moved, or what a dry run would do.
        """
        return await self._client.migrate_run(self.run_id, to, **options)

    async def replay(self, **options: Any) -> ReplayReport:
        """Re-execute the ended run as a new linked run and compare the paths (see `DsmoClient.replay`).

        Args:
            **options: `DsmoClient.replay`'s options (``from_stage``, ``rerun_llm``, ...).

        Returns:
            Both paths, both end statuses and the first divergence.
        """
        return await self._client.replay(self.run_id, **options)
