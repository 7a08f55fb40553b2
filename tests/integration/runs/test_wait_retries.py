"""`onTimeout: retry` waits again: with what the wait had received, and a reminder per timeout.

On Temporal's time-skipping server, so each attempt lasts its real 24 h.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import StatusView
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness, skip_time
from tests.integration.runs.test_waits import finish

pytestmark = pytest.mark.integration

RETRIED = {"timeout": "24h", "onTimeout": "retry", "maxRetries": 2}


def retried_wait(action: str, parameters: dict[str, Any], after: str) -> AgentDefinition:
    return parse_definition(
        {
            "agent": f"retried-{action.replace('_', '-')}",
            "auditLevel": "extended",  # the trail records each message sent (ACTION_COMPLETED)
            "start": "wait",
            "nodes": {
                "wait": {"actionType": action, "parameters": {**parameters, **RETRIED}, "next": "after"},
                "after": {"actionType": "send_message", "parameters": {"message": after}},
            },
        }
    )


async def waiting_in_attempt(harness: Harness, run_id: str, attempt: int) -> StatusView:
    """The run's status once it waits in ``attempt`` (its retries are workflow time, not ours)."""
    for _ in range(600):
        view = await harness.dsmo.status(run_id)
        if view.status is RunStatus.WAITING and (view.waiting_data or {}).get("attempt") == attempt:
            return view
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_id} never waited in attempt {attempt}: {view}")


async def test_a_retried_document_wait_keeps_the_documents_it_received(
    skipping: Harness, time_env: WorkflowEnvironment
) -> None:
    """One document before the first timeout, the other in the second attempt: the run goes on
    with both, as if they had come within one attempt (docs: a document wait resumes when all arrived)."""
    definition = retried_wait("request_document", {"documents": ["id_card", "cv"]}, "docs {{documentUrls}}")
    run_id = await skipping.start(definition)
    await skipping.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    first = await skipping.dsmo.deliver_event(
        run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://d/id"}, event_id="doc-1"
    )
    assert first.detail == "still waiting for: cv"

    await skip_time(time_env, timedelta(hours=25))
    view = await waiting_in_attempt(skipping, run_id, 2)
    assert (view.waiting_data or {}).get("received") == ["id_card"]  # what the retry shows

    second = await skipping.dsmo.deliver_event(
        run_id, "DOCUMENT_UPLOADED", {"document": "cv", "url": "s3://d/cv"}, event_id="doc-2"
    )
    assert (second.accepted, second.detail) == (True, None), second
    result = await skipping.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED, result
    assert result.variables["documentUrls"] == ["s3://d/id", "s3://d/cv"]
    assert [m["message"] for m in skipping.messages(run_id) if m.get("kind") == "message"] == [
        'docs ["s3://d/id","s3://d/cv"]'
    ]
    timeouts = [e for e in await skipping.dsmo.events(run_id) if e.type == "RUN_RESUMED"]
    assert [e.data.get("eventType") for e in timeouts] == ["TIMEOUT", "DOCUMENT_UPLOADED"]


async def test_each_timeout_of_a_retried_wait_sends_its_own_reminder(
    skipping: Harness, time_env: WorkflowEnvironment
) -> None:
    """Three timeouts, three reminders in the outbox: each attempt's message has a key of its own,
    and the trail names the message each attempt sent."""
    reminder = {"actionType": "send_message", "parameters": {"to": "ana@example.com", "message": "REMINDER"}}
    run_id = await skipping.start(retried_wait("wait_for_response", {"timeoutActions": [reminder]}, "after"))
    result = await finish(skipping, time_env, run_id, timedelta(hours=73))
    assert result.status is RunStatus.TIMEOUT, result

    sent = skipping.messages(run_id)
    assert [m["message"] for m in sent] == ["REMINDER"] * 3
    keys = [m["idempotencyKey"] for m in sent]
    assert len(set(keys)) == 3, keys
    recorded = [e for e in await skipping.dsmo.events(run_id) if e.type == "ACTION_COMPLETED"]
    assert [e.stage for e in recorded] == ["wait.timeoutActions.0"] * 3
    assert sorted(e.data["messageId"] for e in recorded) == sorted(keys)
