"""`onTimeout: retry` waits again: with what the wait had received, and a reminder per timeout.

On the real stack, with waits of a few seconds (the stack fires timers within ~50 ms of their
time): each step is awaited by the run's status, not by the clock.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import StatusView
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness

pytestmark = pytest.mark.integration

RETRIED = {"onTimeout": "retry", "maxRetries": 2}


def retried_wait(action: str, parameters: dict[str, Any], after: str, timeout: str) -> AgentDefinition:
    return parse_definition(
        {
            "agent": f"retried-{action.replace('_', '-')}",
            "auditLevel": "extended",  # the trail records each message sent (ACTION_COMPLETED)
            "start": "wait",
            "nodes": {
                "wait": {
                    "actionType": action,
                    "parameters": {**parameters, **RETRIED, "timeout": timeout},
                    "next": "after",
                },
                "after": {"actionType": "send_message", "parameters": {"message": after}},
            },
        }
    )


async def waiting_in_attempt(harness: Harness, run_id: str, attempt: int) -> StatusView:
    """The run's status once it waits in ``attempt`` (its retries are workflow time, not ours)."""
    for _ in range(1200):
        view = await harness.dsmo.status(run_id)
        if view.status is RunStatus.WAITING and (view.waiting_data or {}).get("attempt") == attempt:
            return view
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_id} never waited in attempt {attempt}: {view}")


async def test_a_retried_document_wait_keeps_the_documents_it_received(harness: Harness) -> None:
    """One document before the first timeout, the other in the second attempt: the run goes on
    with both, as if they had come within one attempt (docs: a document wait resumes when all arrived)."""
    # Long enough that the first upload lands in the first attempt however loaded the machine is.
    definition = retried_wait("request_document", {"documents": ["id_card", "cv"]}, "docs {{documentUrls}}", "15s")
    run_id = await harness.start(definition)
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    first = await harness.dsmo.deliver_event(
        run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://d/id"}, event_id="doc-1"
    )
    assert first.detail == "still waiting for: cv"

    view = await waiting_in_attempt(harness, run_id, 2)  # after the first timeout
    assert (view.waiting_data or {}).get("received") == ["id_card"]  # what the retry shows

    second = await harness.dsmo.deliver_event(
        run_id, "DOCUMENT_UPLOADED", {"document": "cv", "url": "s3://d/cv"}, event_id="doc-2"
    )
    assert (second.accepted, second.detail) == (True, None), second
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED, result
    assert result.variables["documentUrls"] == ["s3://d/id", "s3://d/cv"]
    assert [m["message"] for m in harness.messages(run_id) if m.get("kind") == "message"] == [
        'docs ["s3://d/id","s3://d/cv"]'
    ]
    timeouts = [e for e in await harness.dsmo.events(run_id) if e.type == "RUN_RESUMED"]
    assert [e.data.get("eventType") for e in timeouts] == ["TIMEOUT", "DOCUMENT_UPLOADED"]


async def test_each_timeout_of_a_retried_wait_sends_its_own_reminder(harness: Harness) -> None:
    """Three timeouts, three reminders in the outbox: each attempt's message has a key of its own,
    and the trail names the message each attempt sent."""
    reminder = {"actionType": "send_message", "parameters": {"to": "ana@example.com", "message": "REMINDER"}}
    run_id = await harness.start(retried_wait("wait_for_response", {"timeoutActions": [reminder]}, "after", "2s"))
    result = await asyncio.wait_for(harness.dsmo.result(run_id), 120)
    assert result.status is RunStatus.TIMEOUT, result

    sent = harness.messages(run_id)
    assert [m["message"] for m in sent] == ["REMINDER"] * 3
    keys = [m["idempotencyKey"] for m in sent]
    assert len(set(keys)) == 3, keys
    recorded = [e for e in await harness.dsmo.events(run_id) if e.type == "ACTION_COMPLETED"]
    assert [e.stage for e in recorded] == ["wait.timeoutActions.0"] * 3
    assert sorted(e.data["messageId"] for e in recorded) == sorted(keys)
