"""A property of the inbox on the real stack: the order events arrive in never changes a run's outcome.

Hypothesis draws one run's deliveries: the four events it needs in any order, each sent early (at
once) or on time (after the run settled), by update or by raw signal, with duplicates and events
no wait takes mixed in. Every interleaving must end as in-order delivery does: the same path and
variables, each needed event taken exactly once, each duplicate recorded once, every impossible
event refused.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsmo.client.client_errors import EventNotAccepted
from dsmo.client.definition_files import parse_definition_text
from dsmo.client.dsmo_client import DsmoClient
from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness

pytestmark = pytest.mark.asyncio

FLOW = parse_definition_text(
    """
agent: inbox-property
start: greet
nodes:
  greet: {actionType: send_message, parameters: {message: hola}, next: reply}
  reply: {actionType: wait_for_response, parameters: {timeout: 1h, onTimeout: fail}, next: docs}
  docs:
    actionType: request_document
    parameters: {documents: [id_card, payslip], timeout: 1h, onTimeout: fail}
    next: meeting
  meeting: {actionType: wait_for_event, parameters: {event: interview, timeout: 1h, onTimeout: fail}}
"""
)
NEEDED: dict[str, tuple[str, dict[str, Any]]] = {
    "reply": ("MESSAGE_RECEIVED", {"text": "sí"}),
    "id": ("DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://docs/id"}),
    "pay": ("DOCUMENT_UPLOADED", {"document": "payslip", "url": "s3://docs/pay"}),
    "meet": ("EVENT_COMPLETED", {"result": "done"}),
}
# Events no wait of FLOW takes: always refused.
IMPOSSIBLE: dict[str, tuple[str, dict[str, Any]]] = {
    "sign": ("SIGNATURE_COMPLETED", {"signedDocumentUrl": "s3://docs/signed"}),
    "diploma": ("DOCUMENT_UPLOADED", {"document": "diploma", "url": "s3://docs/dip"}),
}
EXPECTED_PATH = ["greet", "reply", "docs", "meeting"]
EXPECTED_VARIABLES = {
    "lastResponse": "sí",
    "documentUrls": ["s3://docs/id", "s3://docs/pay"],
    "eventResult": "done",
}


@dataclass(frozen=True)
class Send:
    key: str  # a NEEDED or IMPOSSIBLE key; the event id is derived from it
    settle_first: bool  # wait until the run waits or has no work in flight (on time), else send at once
    as_signal: bool


def sends(keys: list[str]) -> st.SearchStrategy[list[Send]]:
    return st.lists(
        st.builds(Send, st.just("x"), st.booleans(), st.booleans()), min_size=len(keys), max_size=len(keys)
    ).map(lambda drawn: [Send(key, s.settle_first, s.as_signal) for key, s in zip(keys, drawn, strict=True)])


@st.composite
def deliveries(draw: st.DrawFn) -> list[Send]:
    needed = draw(st.permutations(list(NEEDED)))
    # Extras (duplicates of needed events, impossible events) go anywhere before the last needed
    # event: after it the run may have ended, and a closed run takes nothing at all. So the last
    # needed event is never duplicated (its copy could come first and end the run early).
    extras = draw(st.lists(st.sampled_from([*needed[:-1], *IMPOSSIBLE]), max_size=4))
    order: list[str] = list(needed[:-1])
    for extra in extras:
        order.insert(draw(st.integers(0, len(order))), extra)
    order.append(needed[-1])
    return draw(sends(order))


async def settle(dsmo: DsmoClient, run_id: str) -> None:
    """Until the run waits (or ended): its in-flight work is done."""
    await dsmo.wait_for_status(
        run_id, {RunStatus.WAITING, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.TIMEOUT}, timeout=30
    )


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=deliveries())
async def test_every_interleaving_ends_as_in_order_delivery(harness: Harness, plan: list[Send]) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(FLOW)
    seen: set[str] = set()
    duplicates_sent = 0
    for send in plan:
        event_type, data = NEEDED.get(send.key) or IMPOSSIBLE[send.key]
        event_id = f"{send.key}-1"
        if send.settle_first:
            await settle(dsmo, run_id)
        duplicate = event_id in seen
        if send.key in NEEDED:  # an impossible event is refused every time, never a duplicate
            seen.add(event_id)
        duplicates_sent += duplicate
        if send.as_signal:
            await dsmo.signal_event(run_id, event_type, {"event_id": event_id, **data})
            continue
        try:
            ack = await dsmo.deliver_event(run_id, event_type, data, event_id=event_id)
        except EventNotAccepted as err:
            assert send.key in IMPOSSIBLE, f"{send.key} refused: {err}"
            continue
        assert send.key in NEEDED, f"{send.key} was taken: {ack}"
        assert ack.duplicate is duplicate

    result = await asyncio.wait_for(dsmo.result(run_id), timeout=60)
    assert result.status is RunStatus.COMPLETED
    assert result.path == EXPECTED_PATH
    assert {name: result.variables.get(name) for name in EXPECTED_VARIABLES} == EXPECTED_VARIABLES

    events = await dsmo.events(run_id)
    # Each needed event is taken exactly once: live (it resumed the run, or was a partial upload)
    # or from the inbox (EVENT_CONSUMED; the resume that follows names it again, marked fromInbox).
    live = [e for e in events if e.type in ("RUN_RESUMED", "EVENT_RECEIVED") and not e.data.get("fromInbox")]
    taken = [e.data["eventId"] for e in live if "eventId" in e.data]
    consumed = [e.data["eventId"] for e in events if e.type == "EVENT_CONSUMED"]
    assert sorted(taken + consumed) == sorted(f"{key}-1" for key in NEEDED)
    assert len([e for e in events if e.type == "DUPLICATE_IGNORED"]) == duplicates_sent
    # Impossible events are refused: an update with an error (above), a signal recorded as rejected.
    rejected = sorted(e.data["eventId"] for e in events if e.type == "EVENT_REJECTED")
    assert rejected == sorted(f"{s.key}-1" for s in plan if s.key in IMPOSSIBLE and s.as_signal)
    assert not [e for e in events if e.type in ("EVENT_EXPIRED", "EVENT_BUFFERED") and e.data["eventId"] in rejected]
