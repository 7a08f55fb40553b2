"""`ClientCore`: what every part of the client shares, and nothing else.

The Temporal client, the settings, the object store (opened on first use), the trace each run
started in, and which task queues were seen with a live worker. The client's capabilities
(reading runs, starting them, delivering events, replaying, migrating, erasing, ...) are
functions over a core in their own modules; `DsmoClient` holds one core and calls them. So a
capability depends on this small class, never on the facade that gathers them.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from temporalio.client import Client, WorkflowExecutionDescription, WorkflowHandle, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.definition_store import DefinitionStore
from dsmo.activities.preparation import RunPreparer
from dsmo.client.client_errors import RunNotStarted
from dsmo.client.rpc_errors import rpc_error
from dsmo.client.trail_store import TrailStore
from dsmo.client.unanswered import QUERY_TIMEOUT, query_error
from dsmo.client.with_start import UpdateGates
from dsmo.config.settings import Settings
from dsmo.runtime.storage import artifact_store
from dsmo.runtime.task_queue_pollers import live_pollers
from dsmo.runtime.telemetry import context_from, tracing_enabled
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import check_run_id

TRACE_CACHE_RUNS = 10_000
# A task queue seen with a live poller is not asked again for this long (seconds).
POLLERS_SEEN_FOR = 5.0


class ClientCore:
    """The state a client's calls share: Temporal, settings, the store, run traces.

    Args:
        temporal: A connected Temporal client.
        settings: Where Temporal and the object store are.
        prepare_runs: Write a run's input artifact and config snapshot at its start, so its
            workflow need not (False leaves it to the workflow).
    """

    def __init__(self, temporal: Client, settings: Settings, *, prepare_runs: bool = True) -> None:
        self.temporal = temporal
        self.settings = settings
        self.prepare_runs = prepare_runs
        self.preparer: RunPreparer | None = None  # opened on the first start that prepares its run
        self.update_gates = UpdateGates()  # this client's requests in flight to each flow-control workflow
        self._trails: TrailStore | None = None  # opened when the store is first used
        self._definitions: DefinitionStore | None = None
        # Each run's start trace context (fixed in its memo at start), so events join the run's
        # trace without a describe call per event. Bounded: oldest runs are forgotten first.
        self._run_traces: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._pollers_seen: dict[str, float] = {}  # task queue -> when a live poller was last seen

    # -- the store --------------------------------------------------------------------------

    def trail_store(self) -> TrailStore:
        """The run trails in the store (exports, segments), opened on first use."""
        if self._trails is None:
            self._trails = TrailStore(artifact_store(self.settings))
        return self._trails

    @property
    def artifacts(self) -> ArtifactStore:
        """The artifact store, with the subjects' keys."""
        return self.trail_store().store

    def definition_store(self) -> DefinitionStore:
        """The published definitions in the store, opened on first use."""
        if self._definitions is None:
            self._definitions = DefinitionStore(self.artifacts)
        return self._definitions

    # -- one run in Temporal ----------------------------------------------------------------

    def handle(self, run_id: str) -> WorkflowHandle[Any, Any]:
        """Temporal's handle on the run's workflow (no call made).

        Raises:
            InvalidRunId: ``run_id`` is malformed (named as such, not reported as "not found").
        """
        check_run_id(run_id)
        return self.temporal.get_workflow_handle(run_id)

    async def query(self, run_id: str, name: str, result_type: Any) -> Any:
        """Ask the run's workflow the query ``name``.

        Raises:
            RunNotStarted: The run's first workflow task has not run yet.
            NoWorker: No worker answers (named with the task queue).
            WorkflowTaskFailing: The run's workflow task keeps failing.
            RunNotFound: No run has this id.
        """
        try:
            return await self.handle(run_id).query(name, result_type=result_type, rpc_timeout=QUERY_TIMEOUT)
        except RPCError as err:
            if "not scheduled yet" in str(err) or "first workflow task" in str(err).lower():
                raise RunNotStarted(f"run {run_id!r} has not started yet") from None
            raise await query_error(self.temporal, self.settings, self.handle(run_id), name, err) from None
        except WorkflowQueryFailedError as err:
            raise DsmoError(f"run {run_id}: query {name} failed: {err}") from None

    async def describe(self, run_id: str) -> WorkflowExecutionDescription | None:
        """The run's description; None if the server's answer cannot be decoded (Temporal's
        time-skipping test server sends search attributes the SDK cannot parse).

        Raises:
            RunNotFound: No run has this id.
        """
        try:
            return await self.handle(run_id).describe()
        except RPCError as err:
            raise rpc_error(self.settings, run_id, err) from None
        except (TypeError, ValueError):
            return None

    async def exists(self, run_id: str) -> bool:
        """Whether Temporal has (or had, within retention) a run of this id."""
        try:
            await self.handle(run_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return False
            raise rpc_error(self.settings, run_id, err) from None
        except (TypeError, ValueError):
            return True  # described, though not decodable (the time-skipping server)
        return True

    async def has_ended(self, run_id: str) -> bool:
        """Whether the run has ended (or Temporal no longer has it): only such a run exports its trail."""
        try:
            return (await self.handle(run_id).describe()).close_time is not None
        except RPCError as err:
            return err.status == RPCStatusCode.NOT_FOUND
        except (TypeError, ValueError):  # (the time-skipping server's attributes do not decode)
            return False

    async def worker_polling(self, task_queue: str) -> bool:
        """Is a live worker polling ``task_queue``? A yes is remembered for a few seconds."""
        now = asyncio.get_running_loop().time()
        seen = self._pollers_seen.get(task_queue)
        if seen is not None and now - seen < POLLERS_SEEN_FOR:
            return True
        try:
            polling = bool(await live_pollers(self.temporal, task_queue))
        except RPCError:
            return True  # cannot tell: let the query decide
        if polling:
            self._pollers_seen[task_queue] = now
        return polling

    # -- traces -----------------------------------------------------------------------------

    async def run_trace(self, run_id: str) -> Any:
        """The trace the run started in (from its memo), so events extend it; None if unknown."""
        if not tracing_enabled():
            # The event's span would be a no-op: skip the describe call that looks up the run's
            # trace (a round trip before every event from a process that did not start the run).
            return None
        carrier = self._run_traces.get(run_id)
        if carrier is None:
            try:
                memo = await (await self.handle(run_id).describe()).memo()
            except (RPCError, ValueError, TypeError):
                return None
            found = memo.get("trace")
            carrier = found if isinstance(found, dict) else {}
            self.remember_trace(run_id, carrier)
        return context_from(carrier) if carrier else None

    def remember_trace(self, run_id: str, carrier: dict[str, str]) -> None:
        """Keep the trace ``run_id`` started in (the oldest run is forgotten past the bound)."""
        self._run_traces[run_id] = carrier
        if len(self._run_traces) > TRACE_CACHE_RUNS:
            self._run_traces.popitem(last=False)
