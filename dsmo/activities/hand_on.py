"""Handing on messages a run was delivered (``onBusy: deliver``) but never took, to runs of their own.

The starter that delivered a start's events to a key's active run kept the start in the store
(`delivery_key`). When that run ends with some of them still in its inbox, this activity starts,
for each, the run the start would have been: the same definition version, input and events. Its
id is derived from the event's, so a retry starts nothing twice. The new run then waits its turn
for the key like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from typing import Any

from temporalio import activity
from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from dsmo.activities.artifacts import ArtifactErased, ArtifactMissing, ArtifactStore
from dsmo.activities.definition_store import config_key
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.patches import NEXT_EXECUTION
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import HAND_ON
from dsmo.workflows.contracts.run_records import ExecutionRequest
from dsmo.workflows.contracts.slot_io import HandedOn, HandOn, delivery_key
from dsmo.workflows.definition.model import AgentDefinition


class HandOnActivities:
    """Starting runs for delivered events their run never took.

    Args:
        client: The Temporal client.
        store: Where starters keep delivered starts, and configuration snapshots are.
        task_queue: Where the new runs go when a start did not say.
    """

    def __init__(self, client: Client, store: ArtifactStore, task_queue: str) -> None:
        self.client = client
        self.store = store
        self.task_queue = task_queue

    @activity.defn(name=HAND_ON)
    async def hand_on_deliveries(self, ask: HandOn) -> HandedOn:
        """Start a run for each event whose start was kept; the runs by event id."""
        runs: dict[str, str] = {}
        for event_id in ask.event_ids:
            record = await asyncio.to_thread(self._delivered, ask.run_id, event_id)
            if record is not None:
                runs[event_id] = await self._start(record, event_id)
        return HandedOn(runs=runs)

    def _delivered(self, run_id: str, event_id: str) -> dict[str, Any] | None:
        try:
            record: dict[str, Any] = self.store.read_json(self.store.uri(delivery_key(run_id, event_id)))
        except ArtifactMissing:
            return None  # an event sent to the run itself, not a start delivered to it
        except ArtifactErased:
            return None  # its data subject was erased: the start it stood for goes with it
        return record

    async def _start(self, record: dict[str, Any], event_id: str) -> str:
        snapshot = await asyncio.to_thread(self.store.read_json, self.store.uri(config_key(record["workflowVersion"])))
        definition = AgentDefinition.model_validate(snapshot["definition"])
        run_id = f"{definition.agent}-{hashlib.sha256(event_id.encode()).hexdigest()[:12]}"
        event = next(event for event in record["events"] if event["event_id"] == event_id)
        queue = record.get("taskQueue") or self.task_queue
        request = ExecutionRequest(definition=definition, input=record["input"], origin={"handedOnEvent": event_id})
        operation: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            "AgentExecution",
            request.started_on(queue).model_copy(update=NEXT_EXECUTION),  # no marker per change
            id=run_id,
            task_queue=queue,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(sa.AGENT_EXECUTION_STATUS, RunStatus.PENDING.value),
                    SearchAttributePair(sa.AGENT_NAME, definition.agent),
                    SearchAttributePair(sa.WORKFLOW_VERSION, definition.workflow_version),
                ]
            ),
        )
        with contextlib.suppress(WorkflowAlreadyStartedError):  # handed on by an earlier attempt of this activity
            await self.client.execute_update_with_start_workflow(
                "deliver_event", event, start_workflow_operation=operation
            )
        return run_id
