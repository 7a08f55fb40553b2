"""A run whose wait times out into its ending says so before its timeout actions go out, and every
request racing that ending is answered: taken (and then seen in the run's outcome) or refused with
the reason, never acknowledged and then lost.

The race is made deterministic by holding the timeout's message on a `threading.Event` until the
test has placed its requests."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from dsmo.activities.messaging import FileChannel
from dsmo.client.client_errors import EventNotAccepted, MigrationNotAccepted, RewindNotAccepted
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness

pytestmark = pytest.mark.integration

# A hang guard for every answer a request gets (not a timing assertion).
ANSWER_WITHIN = 60.0


class HeldMessages(FileChannel):
    """A file channel whose messages wait for ``release`` once ``sending`` is set."""

    def __init__(self, outbox: Path) -> None:
        super().__init__(outbox)
        self.sending, self.release = threading.Event(), threading.Event()

    def send(self, message: Any) -> Any:
        self.sending.set()
        self.release.wait(120)  # a hang guard: the test releases it
        return super().send(message)


def reminder(agent: str, version: str, timeout: str) -> AgentDefinition:
    """A wait for ``shipped`` that, on its timeout, sends a message and fails the run."""
    wait = {
        "event": "shipped",
        "timeout": timeout,
        "onTimeout": "fail",
        "timeoutActions": [{"actionType": "send_message", "parameters": {"message": "no news", "to": "ana"}}],
    }
    nodes = {"shipped": {"actionType": "wait_for_event", "parameters": wait}}
    return parse_definition({"agent": agent, "version": version, "start": "shipped", "nodes": nodes})


async def test_a_run_timing_out_refuses_requests_while_its_timeout_actions_are_sent(
    harness: Harness, tmp_path: Path
) -> None:
    dsmo, agent = harness.dsmo, f"timeout-actions-{uuid.uuid4().hex[:8]}"
    v1, v2 = reminder(agent, "1", "1s"), reminder(agent, "2", "1h")
    await dsmo.publish(v1)
    await dsmo.publish(v2)
    channel = HeldMessages(tmp_path / "outbox")
    queue = f"timeout-actions-{uuid.uuid4().hex[:8]}"
    worker = build_worker(dsmo.temporal, task_queue=queue, store=harness.store, channel=channel)
    try:
        async with worker:
            run_id = (await dsmo.start(v1, task_queue=queue)).run_id
            harness.started.append(run_id)
            assert await asyncio.to_thread(channel.sending.wait, 60), "the wait never timed out"
            view = await dsmo.status(run_id)
            assert view.status is RunStatus.RUNNING and view.waiting_for is None, view  # it left its wait
            asks = [
                (EventNotAccepted, dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "shipped"})),
                (RewindNotAccepted, dsmo.rewind(run_id, "shipped", reason="again")),
                (MigrationNotAccepted, dsmo.migrate_run(run_id, v2, reason="longer wait")),
            ]
            for error, ask in asks:
                with pytest.raises(error) as refused:
                    await asyncio.wait_for(ask, ANSWER_WITHIN)
                message = str(refused.value)
                assert "the run is ending (timeout)" in message and "\n" not in message, message
            channel.release.set()
            result = await asyncio.wait_for(dsmo.result(run_id), ANSWER_WITHIN)
    finally:
        channel.release.set()
    assert result.status is RunStatus.TIMEOUT, result
    kinds = [event.type for event in await dsmo.events(run_id)]
    assert not {"RUN_REWOUND", "RUN_MIGRATED", "RUN_RESUMED"} & set(kinds), kinds
