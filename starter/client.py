"""The Python API: start runs, deliver events, read status, audit trail and results."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from starter.settings import Settings
from workflows import search_attributes as sa
from workflows.definition import AgentDefinition
from workflows.errors import DsmoError
from workflows.events import EventAck
from workflows.records import AuditEvent, ExecutionRequest, ExecutionResult, StatusView
from workflows.status import RunStatus

WORKFLOW_TYPE = "AgentExecution"


class RunNotFound(DsmoError):
    code = "run_not_found"


class RunAlreadyExists(DsmoError):
    code = "run_exists"


class RunClosed(DsmoError):
    code = "run_closed"


class EventNotAccepted(DsmoError):
    code = "event_rejected"


class TemporalUnavailable(DsmoError):
    code = "temporal_unavailable"


async def connect_temporal(settings: Settings) -> Client:
    try:
        return await Client.connect(
            settings.temporal_address,
            namespace=settings.temporal_namespace,
            data_converter=pydantic_data_converter,
        )
    except RuntimeError as err:
        raise TemporalUnavailable(
            f"TEMPORAL_ADDRESS: cannot reach Temporal at {settings.temporal_address} ({_first_line(err)}); "
            "start the stack with `dsmo dev up`"
        ) from None


class DsmoClient:
    def __init__(self, client: Client, settings: Settings) -> None:
        self.temporal = client
        self.settings = settings

    @classmethod
    async def connect(cls, settings: Settings | None = None) -> DsmoClient:
        settings = settings or Settings.from_env()
        return cls(await connect_temporal(settings), settings)

    # -- runs -------------------------------------------------------------------------------

    async def start(
        self,
        definition: AgentDefinition,
        input: dict[str, Any] | None = None,
        *,
        run_id: str | None = None,
        task_queue: str | None = None,
        correlation_id: str | None = None,
    ) -> str:
        """Start a run; returns its id (the Temporal workflow id). Run ids are never reused."""
        run_id = run_id or f"{definition.agent}-{uuid.uuid4().hex[:12]}"
        request = ExecutionRequest(definition=definition, input=input or {}, correlation_id=correlation_id)
        try:
            await self.temporal.start_workflow(
                WORKFLOW_TYPE,
                request,
                id=run_id,
                task_queue=task_queue or self.settings.task_queue,
                # A run id names one audit trail for good: refuse to reuse it even after it closed.
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                search_attributes=TypedSearchAttributes(
                    [
                        # Set at start, so a run shows `pending` before its first workflow task.
                        SearchAttributePair(sa.AGENT_EXECUTION_STATUS, RunStatus.PENDING.value),
                        SearchAttributePair(sa.AGENT_NAME, definition.agent),
                        SearchAttributePair(sa.WORKFLOW_VERSION, definition.workflow_version),
                    ]
                ),
            )
        except WorkflowAlreadyStartedError:
            raise RunAlreadyExists(f"run {run_id!r} already exists; choose another --id") from None
        return run_id

    async def status(self, run_id: str) -> StatusView:
        view: StatusView = await self._query(run_id, "status", StatusView)
        return view

    async def events(self, run_id: str) -> list[AuditEvent]:
        trail: list[AuditEvent] = await self._query(run_id, "events", list[AuditEvent])
        return trail

    async def variables(self, run_id: str) -> dict[str, Any]:
        values: dict[str, Any] = await self._query(run_id, "variables", dict[str, Any])
        return values

    async def result(self, run_id: str) -> ExecutionResult:
        """Wait for the run to end; failed and timed-out runs return their record too."""
        handle = self.temporal.get_workflow_handle(run_id, result_type=ExecutionResult)
        try:
            result: ExecutionResult = await handle.result()
            return result
        except WorkflowFailureError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.details:
                return ExecutionResult.model_validate(cause.details[0])
            raise
        except RPCError as err:
            raise self._rpc_error(run_id, err) from None

    async def wait_for_status(
        self, run_id: str, statuses: set[RunStatus], *, timeout: float = 30.0, interval: float = 0.1
    ) -> StatusView:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            view = await self.status(run_id)
            if view.status in statuses:
                return view
            if view.status.terminal:
                detail = view.error_message or view.result_summary or ""
                raise DsmoError(f"run {run_id} ended {view.status}, not {'/'.join(sorted(statuses))}: {detail}")
            if asyncio.get_running_loop().time() > deadline:
                raise DsmoError(
                    f"run {run_id} is {view.status}, not {'/'.join(sorted(statuses))}, after {timeout:.0f}s"
                )
            await asyncio.sleep(interval)

    # -- events -----------------------------------------------------------------------------

    async def deliver_event(
        self, run_id: str, event_type: str, data: dict[str, Any], *, event_id: str | None = None
    ) -> EventAck:
        """Deliver a resume event through the validated `deliver_event` update."""
        event = {"type": event_type, "event_id": event_id or str(uuid.uuid4()), "data": data}
        try:
            ack: EventAck = await self._handle(run_id).execute_update("deliver_event", event, result_type=EventAck)
            return ack
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            message = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            raise EventNotAccepted(f"{event_type} rejected: {message}") from None
        except RPCError as err:
            raise self._rpc_error(run_id, err) from None

    async def respond(self, run_id: str, text: str, *, event_id: str | None = None) -> EventAck:
        return await self.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": text}, event_id=event_id)

    async def signal_event(self, run_id: str, event_type: str, payload: dict[str, Any]) -> None:
        """Fire-and-forget: the run records the event as applied, duplicate or rejected."""
        try:
            await self._handle(run_id).signal(event_type, payload)
        except RPCError as err:
            raise self._rpc_error(run_id, err) from None

    # -- helpers ----------------------------------------------------------------------------

    def _handle(self, run_id: str) -> WorkflowHandle[Any, Any]:
        return self.temporal.get_workflow_handle(run_id)

    async def _query(self, run_id: str, name: str, result_type: Any) -> Any:
        try:
            return await self._handle(run_id).query(name, result_type=result_type)
        except WorkflowQueryFailedError as err:
            raise DsmoError(f"run {run_id}: query {name} failed: {err}") from None
        except RPCError as err:
            raise self._rpc_error(run_id, err) from None

    def _rpc_error(self, run_id: str, err: RPCError) -> DsmoError:
        if err.status == RPCStatusCode.NOT_FOUND:
            text = str(err).lower()
            if "already completed" in text or "closed" in text or "completed" in text:
                return RunClosed(f"run {run_id!r} has already ended; it is not waiting for any event")
            return RunNotFound(f"run {run_id!r} not found in namespace {self.settings.temporal_namespace}")
        if err.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            return TemporalUnavailable(
                f"Temporal at {self.settings.temporal_address} is unavailable: {_first_line(err)}"
            )
        return DsmoError(f"run {run_id!r}: {_first_line(err)}")


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
