"""The inbox's pure rules: which waits lie ahead, what they take, bounds, and `match` at publish."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from dsmo.workflows.definition.waits_ahead import takes_kind, waits_ahead
from dsmo.workflows.events.inbox import MAX_INBOX_BYTES, InboxEntry, InboxPolicy, event_size, full_reason, inbox_view
from dsmo.workflows.events.resume_events import ResumeEvent

BRANCHES: dict[str, Any] = {
    "agent": "branches",
    "start": "ask",
    "failSafe": "oops",
    "nodes": {
        "ask": {
            "actionType": "wait_for_response",
            "transitions": [{"when": "lastResponse == 'docs'", "to": "docs"}, {"to": "sign"}],
        },
        "docs": {"actionType": "request_document", "parameters": {"documents": ["id_card"]}, "next": "again"},
        "again": {"actionType": "delay", "parameters": {"duration": "1h"}, "next": "ask_more"},
        "ask_more": {
            "actionType": "wait_for_response",
            "transitions": [{"when": "lastResponse == 'more'", "to": "docs"}, {"to": "end"}],
        },
        "sign": {"actionType": "request_signature", "parameters": {"document": "s3://contract"}, "next": "end"},
        "end": {"actionType": "send_message", "parameters": {"message": "bye"}},
        "oops": {"actionType": "wait_for_event", "parameters": {"event": "call"}},
    },
}


def event(event_type: str, **data: Any) -> ResumeEvent:
    return ResumeEvent(type=event_type, event_id="e-1", data=data)


def ahead(definition: AgentDefinition, node: str | None, *, include_current: bool, fail_safe: bool = False) -> set[str]:
    found = waits_ahead(definition, node, include_current=include_current, fail_safe=fail_safe)
    return {next(name for name, candidate in definition.nodes.items() if candidate is node) for node in found}


def test_waits_ahead_follow_every_branch_and_loop() -> None:
    definition = parse_definition(BRANCHES)
    assert ahead(definition, None, include_current=True) == {"ask", "docs", "ask_more", "sign"}
    # Waiting at `ask`, only what comes after counts; `ask` itself is not reached again.
    assert ahead(definition, "ask", include_current=False) == {"docs", "ask_more", "sign"}
    # `docs` is in a loop (docs -> again -> ask_more -> docs): waiting there, it is ahead of itself.
    assert ahead(definition, "docs", include_current=False) == {"docs", "ask_more"}
    assert ahead(definition, "sign", include_current=False) == set()
    assert ahead(definition, "sign", include_current=False, fail_safe=True) == {"oops"}


def test_a_wait_takes_its_kind_and_a_document_wait_only_its_documents() -> None:
    nodes = parse_definition(BRANCHES).nodes
    assert takes_kind(nodes["ask"], event("MESSAGE_RECEIVED", text="hi"))
    assert not takes_kind(nodes["ask"], event("EVENT_COMPLETED"))
    assert takes_kind(nodes["docs"], event("DOCUMENT_UPLOADED", document="id_card", url="s3://i"))
    assert not takes_kind(nodes["docs"], event("DOCUMENT_UPLOADED", document="diploma", url="s3://d"))


def test_the_inbox_is_full_at_max_events_or_at_its_byte_cap() -> None:
    policy = InboxPolicy(max_events=2)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    small = event("MESSAGE_RECEIVED", text="hi")
    entry = InboxEntry(event=small, arrived_at=now, via="update", size=event_size(small))
    assert full_reason([entry], policy, 10) is None
    assert "inbox.maxEvents is 2" in (full_reason([entry, entry], policy, 10) or "")
    assert f"of {MAX_INBOX_BYTES} bytes" in (full_reason([entry], policy, MAX_INBOX_BYTES) or "")
    view = inbox_view([entry, entry.model_copy(update={"event": event("EVENT_COMPLETED")})])
    assert view is not None and view.count == 2 and view.kinds == {"EVENT_COMPLETED": 1, "MESSAGE_RECEIVED": 1}
    assert view.oldest_at == now and inbox_view([]) is None


@pytest.mark.parametrize(
    ("inbox", "message"),
    [
        ({"ttl": "31d"}, "inbox.ttl: 31d is above the maximum of 30d"),
        ({"maxEvents": 101}, "inbox.maxEvents"),
        ({"ttl": "soon"}, "inbox.ttl"),
    ],
)
def test_inbox_bounds_are_checked(inbox: dict[str, Any], message: str) -> None:
    with pytest.raises(DefinitionError, match=message.replace(".", r"\.")):
        parse_definition({**BRANCHES, "inbox": inbox})


def test_an_absent_inbox_keeps_the_workflow_version() -> None:
    plain = parse_definition(BRANCHES)
    assert "inbox" not in plain.canonical_json()
    assert parse_definition({**BRANCHES, "inbox": {"ttl": "1d"}}).workflow_version != plain.workflow_version


def with_match(expression: str) -> dict[str, Any]:
    nodes = dict(BRANCHES["nodes"])
    nodes["ask"] = {**nodes["ask"], "parameters": {"threadId": "t-1", "match": expression}}
    return {**BRANCHES, "nodes": nodes}


def test_a_match_is_compiled_and_checked_at_publish() -> None:
    parse_definition(with_match("event.data.threadId == waitingData.threadId"))
    with pytest.raises(DefinitionError, match=r"nodes\.ask\.parameters\.match: does not compile"):
        parse_definition(with_match("event.data.threadId =="))
    with pytest.raises(DefinitionError, match=r"nodes\.ask\.parameters\.match: refers to unknown field 'candidate'"):
        parse_definition(with_match("candidate.name == event.data.from"))
    with pytest.raises(DefinitionError, match=r"nodes\.ask\.parameters\.match: refers to unknown config key 'x'"):
        parse_definition(with_match("event.data.score > config.x"))


def test_status_and_acks_show_the_inbox_in_one_line() -> None:
    from datetime import timedelta

    from dsmo.cli.render import ack_line, status_lines
    from dsmo.workflows.common.status import RunStatus
    from dsmo.workflows.contracts.run_records import StatusView
    from dsmo.workflows.events.inbox import InboxView
    from dsmo.workflows.events.resume_events import EventAck

    oldest = datetime.now(UTC) - timedelta(minutes=2, seconds=5)
    view = StatusView(
        run_id="r-1",
        agent="a",
        workflow_version="v",
        status=RunStatus.WAITING,
        waiting_for="response",
        inbox=InboxView(
            count=3, kinds={"DOCUMENT_UPLOADED": 2, "EVENT_COMPLETED": 1}, oldest_at=oldest, oldest_event_id="up-1"
        ),
    )
    [line] = [line for line in status_lines(view, run_url="http://ui") if line.startswith("inbox")]
    assert re.search(r"  3 kept \(DOCUMENT_UPLOADED 2, EVENT_COMPLETED 1\); oldest up-1, 2m[5-9]s ago$", line), line
    kept = EventAck(event_id="e-1", accepted=True, buffered=True, status="waiting", detail="kept in the run's inbox")
    assert ack_line(kept, "r-1", "EVENT_COMPLETED") == "kept: EVENT_COMPLETED e-1 for r-1 (kept in the run's inbox)"
    assert ack_line(EventAck(event_id="e-1", accepted=True, status="running"), "r-1") == "delivered: e-1 to r-1"
