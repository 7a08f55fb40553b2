"""Runs parked on a task queue of their own: started, waiting, then left with no worker polling.

What is sent to a parked run meanwhile (a reply, a move, a cancel) reaches it in one workflow task
once a worker runs again: the way to test what a task that carries several requests does.
"""

from __future__ import annotations

import uuid

from temporalio.worker import Worker

from dsmo.activities.messaging import FileChannel
from dsmo.worker import build_worker
from dsmo.workflows.definition.model import AgentDefinition
from tests.conftest import Harness
from tests.integration.changes.test_cancel_racing_handover import waiting


class ParkedRuns:
    """A task queue of the test's own, whose worker the test starts and stops."""

    def __init__(self, harness: Harness, prefix: str) -> None:
        self.harness = harness
        self.queue = f"{prefix}-{uuid.uuid4().hex[:8]}"

    def worker(self) -> Worker:
        """A worker on the queue (use it as an async context manager)."""
        harness = self.harness
        channel = FileChannel(harness.outbox)
        return build_worker(harness.dsmo.temporal, task_queue=self.queue, store=harness.store, channel=channel)

    async def park(self, definition: AgentDefinition) -> str:
        """Start a run of ``definition``, wait until it waits, and stop the worker; the run's id."""
        async with self.worker():
            run_id = (await self.harness.dsmo.start(definition, task_queue=self.queue)).run_id
            self.harness.started.append(run_id)
            await waiting(self.harness, run_id)
        return run_id
