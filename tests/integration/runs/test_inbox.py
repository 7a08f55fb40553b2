"""The event inbox on the real stack: early events are kept for a wait ahead, never lost.

Each test drives one run through the validated update (and raw signals where the test says so)
and asserts what the run shows: its status and inbox, its variables, and the audit trail's
EVENT_BUFFERED / EVENT_CONSUMED / EVENT_EXPIRED / EVENT_REJECTED records.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from temporalio.api.enums.v1 import EventType

from dsmo.activities.messaging import FileChannel
from dsmo.client import replay as dsmo_replay
from dsmo.client.client_errors import EventNotAccepted, RunNotFound
from dsmo.client.dsmo_client import DsmoClient
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import SendMessageRequest, SentMessage
from dsmo.workflows.contracts.run_records import AuditEvent
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from dsmo.workflows.run.intake import INBOX_PATCH
from tests.conftest import Harness
from tests.integration.runs.test_runs_under_older_checks import has_patch_marker, older_code, replays, takes_change
from tests.polling import until_value

pytestmark = pytest.mark.asyncio

CHAT = """
agent: inbox-chat
start: greet
nodes:
  greet:
    actionType: send_message
    parameters: {message: "Hola, ¿sigues interesada?"}
    next: reply
  reply:
    actionType: wait_for_response
    parameters: {timeout: 1h, onTimeout: fail}
    next: docs
  docs:
    actionType: request_document
    parameters: {documents: [id_card, payslip], timeout: 1h, onTimeout: fail}
    next: meeting
  meeting:
    actionType: wait_for_event
    parameters: {event: interview, timeout: 1h, onTimeout: fail}
"""


def chat(**changes: Any) -> AgentDefinition:
    data = yaml.safe_load(CHAT)
    for path, value in changes.items():
        target = data
        *parents, leaf = path.split(".")
        for key in parents:
            target = target[key]
        if value is None:
            target.pop(leaf, None)
        else:
            target[leaf] = value
    # Keep only the nodes still reachable (a cut `next` ends the conversation there).
    reachable, node = [], data["start"]
    while node is not None:
        reachable.append(node)
        node = data["nodes"][node].get("next")
    data["nodes"] = {name: data["nodes"][name] for name in reachable}
    return parse_definition(data)


def of(events: list[AuditEvent], *types: str) -> list[AuditEvent]:
    return [event for event in events if event.type in types]


async def deliver(dsmo: DsmoClient, run_id: str, event_type: str, data: dict[str, Any], event_id: str) -> Any:
    return await dsmo.deliver_event(run_id, event_type, data, event_id=event_id)


async def test_early_documents_and_event_are_kept_and_taken_by_the_later_waits(harness: Harness) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(chat())
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})

    # The applicant uploads both documents, and the calendar reports the meeting, before replying.
    payslip = await deliver(dsmo, run_id, "DOCUMENT_UPLOADED", {"document": "payslip", "url": "s3://d/p"}, "up-1")
    assert payslip.accepted and payslip.buffered and "inbox" in (payslip.detail or "")
    await deliver(dsmo, run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://d/i"}, "up-2")
    await deliver(dsmo, run_id, "EVENT_COMPLETED", {"result": "done"}, "cal-1")
    view = await dsmo.status(run_id)
    assert view.status is RunStatus.WAITING and view.waiting_for == "response"
    assert view.inbox is not None and view.inbox.count == 3
    assert view.inbox.kinds == {"DOCUMENT_UPLOADED": 2, "EVENT_COMPLETED": 1}
    assert view.inbox.oldest_event_id == "up-1"

    # The reply resumes the run; the document and meeting waits take the kept events at once.
    await dsmo.respond(run_id, "sí", event_id="reply-1")
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert result.variables["documentUrls"] == ["s3://d/i", "s3://d/p"]  # in the requested order
    assert result.variables["eventResult"] == "done"

    events = await dsmo.events(run_id)
    buffered = of(events, "EVENT_BUFFERED")
    assert [(e.stage, e.data["eventId"]) for e in buffered] == [
        ("reply", "up-1"),
        ("reply", "up-2"),
        ("reply", "cal-1"),
    ]
    taken = [(e.stage, e.data["eventId"]) for e in of(events, "EVENT_CONSUMED")]
    assert taken == [("docs", "up-1"), ("docs", "up-2"), ("meeting", "cal-1")]
    resumed = {e.stage: e.data for e in of(events, "RUN_RESUMED")}
    assert resumed["docs"]["fromInbox"] and resumed["meeting"]["fromInbox"] and "fromInbox" not in resumed["reply"]
    assert not of(events, "EVENT_REJECTED", "EVENT_EXPIRED")

    # dsmo replay re-runs it from its record: the same path and variables, without waiting.
    report = await dsmo_replay.replay(dsmo.core, harness.store, run_id, task_queue=harness.task_queue)
    replayed = await dsmo.result(report.replay)
    assert replayed.path == result.path and replayed.variables["documentUrls"] == result.variables["documentUrls"]


async def test_events_no_wait_ahead_takes_are_refused_and_duplicates_recorded_once(harness: Harness) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(chat())
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})

    with pytest.raises(EventNotAccepted, match="is waiting for response and no wait ahead takes a signature"):
        await deliver(dsmo, run_id, "SIGNATURE_COMPLETED", {"signedDocumentUrl": "s3://s"}, "sig-1")
    with pytest.raises(EventNotAccepted, match="'diploma' was not requested"):
        await deliver(dsmo, run_id, "DOCUMENT_UPLOADED", {"document": "diploma", "url": "s3://d"}, "up-x")
    # A raw signal nothing ahead takes is recorded as rejected; the run goes on.
    await dsmo.signal_event(run_id, "TEST_COMPLETED", {"event_id": "test-1", "score": 9, "result": "pass"})

    kept = await deliver(dsmo, run_id, "EVENT_COMPLETED", {"result": "done"}, "cal-1")
    again = await deliver(dsmo, run_id, "EVENT_COMPLETED", {"result": "done"}, "cal-1")
    assert kept.buffered and again.duplicate and not again.accepted
    await dsmo.respond(run_id, "sí", event_id="reply-1")
    await deliver(dsmo, run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://d/i"}, "up-1")
    await deliver(dsmo, run_id, "DOCUMENT_UPLOADED", {"document": "payslip", "url": "s3://d/p"}, "up-2")
    # The kept event was consumed and the run ended: the same id once more is still a duplicate.
    late = await deliver(dsmo, run_id, "EVENT_COMPLETED", {"result": "done"}, "cal-1")
    assert late.duplicate
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED

    events = await dsmo.events(run_id)
    # The late copy is recorded too if it reached the run before it ended; after, the client
    # answers it from the trail without writing anything.
    assert [e.data["eventId"] for e in of(events, "DUPLICATE_IGNORED")] in (["cal-1"], ["cal-1", "cal-1"])
    # (an upload may be kept too: it can arrive while the document request is still going out)
    assert [e.data["eventId"] for e in of(events, "EVENT_CONSUMED")].count("cal-1") == 1
    rejected = of(events, "EVENT_REJECTED")
    assert [e.data["eventId"] for e in rejected] == ["test-1"]
    assert "no wait ahead takes a test" in rejected[0].data["reason"]


async def test_a_full_inbox_refuses_with_a_reason_and_takes_again_once_emptied(harness: Harness) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(chat(inbox={"maxEvents": 2}))
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await deliver(dsmo, run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://d/i"}, "up-1")
    await deliver(dsmo, run_id, "DOCUMENT_UPLOADED", {"document": "payslip", "url": "s3://d/p"}, "up-2")
    with pytest.raises(EventNotAccepted, match=r"inbox is full \(2 events kept, inbox.maxEvents is 2\)"):
        await deliver(dsmo, run_id, "EVENT_COMPLETED", {"result": "done"}, "cal-1")
    await dsmo.respond(run_id, "sí", event_id="reply-1")
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    # The refused event was not recorded as seen: the sender's retry is taken now.
    assert (await deliver(dsmo, run_id, "EVENT_COMPLETED", {"result": "done"}, "cal-1")).accepted
    assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED


async def test_match_takes_the_right_thread_and_refuses_the_wrong_one(harness: Harness) -> None:
    dsmo = harness.dsmo
    definition = chat(
        **{
            "nodes.reply.parameters": {
                "threadId": "t-1",
                "expectedFrom": "postulant",
                "match": "event.data.threadId == waitingData.threadId",
                "timeout": "1h",
                "onTimeout": "fail",
            },
            "nodes.reply.next": None,
        }
    )
    run_id = await harness.start(definition)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    with pytest.raises(EventNotAccepted, match="does not match reply's match"):
        await deliver(dsmo, run_id, "MESSAGE_RECEIVED", {"text": "otro hilo", "threadId": "t-2"}, "m-1")
    with pytest.raises(EventNotAccepted, match="'recruiter' is not the sender reply expects"):
        await deliver(dsmo, run_id, "MESSAGE_RECEIVED", {"text": "yo", "threadId": "t-1", "from": "recruiter"}, "m-2")
    await deliver(dsmo, run_id, "MESSAGE_RECEIVED", {"text": "sí", "threadId": "t-1", "from": "postulant"}, "m-3")
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.variables["lastResponse"] == "sí"


async def test_an_early_event_of_a_run_that_times_out_elsewhere_expires_with_it(harness: Harness) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(chat(**{"nodes.reply.parameters": {"timeout": "2s", "onTimeout": "fail"}}))
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await deliver(dsmo, run_id, "EVENT_COMPLETED", {"result": "done"}, "cal-1")
    assert (await dsmo.result(run_id)).status is RunStatus.TIMEOUT
    view = await dsmo.status(run_id)
    assert view.status is RunStatus.TIMEOUT and view.inbox is None
    expired = of(await dsmo.events(run_id), "EVENT_EXPIRED")
    assert [(e.data["eventId"], e.data["reason"]) for e in expired] == [("cal-1", "the run ended (timeout)")]


async def test_the_inbox_and_the_dedup_ledger_cross_continue_as_new(harness: Harness) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(chat(), history_limit=40)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await deliver(dsmo, run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://d/i"}, "up-1")
    await deliver(dsmo, run_id, "DOCUMENT_UPLOADED", {"document": "payslip", "url": "s3://d/p"}, "up-2")
    # Each refused duplicate still adds history events: push the run over its limit while it waits.
    for _ in range(8):
        await deliver(dsmo, run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://d/i"}, "up-1")
        if of(await dsmo.events(run_id), "RUN_CONTINUED"):
            break
    assert of(await dsmo.events(run_id), "RUN_CONTINUED"), "the run did not continue as new"
    view = await dsmo.status(run_id)
    assert view.inbox is not None and view.inbox.count == 2
    assert (await deliver(dsmo, run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "x"}, "up-1")).duplicate
    await dsmo.respond(run_id, "sí", event_id="reply-1")
    await deliver(dsmo, run_id, "EVENT_COMPLETED", {"result": "done"}, "cal-1")
    result = await dsmo.result(run_id)
    assert result.variables["documentUrls"] == ["s3://d/i", "s3://d/p"]


class GatedChannel(FileChannel):
    """A file channel whose sends block until the test opens the gate."""

    def __init__(self, outbox: Path) -> None:
        super().__init__(outbox)
        self.entered = threading.Event()
        self.gate = threading.Event()

    def send(self, message: SendMessageRequest) -> SentMessage:
        self.entered.set()
        self.gate.wait(timeout=60)
        return super().send(message)


@pytest_asyncio.fixture
async def gated(harness: Harness, tmp_path: Path) -> AsyncIterator[tuple[Harness, GatedChannel]]:
    channel = GatedChannel(tmp_path / "gated")
    queue = f"gated-{uuid.uuid4().hex[:8]}"
    async with build_worker(harness.dsmo.temporal, task_queue=queue, store=harness.store, channel=channel):
        yield Harness(harness.dsmo, harness.store, queue, tmp_path / "gated", harness.settings), channel
    channel.gate.set()


async def test_a_reply_sent_while_the_message_is_still_being_sent_resumes_the_run(
    gated: tuple[Harness, GatedChannel],
) -> None:
    harness, channel = gated
    dsmo = harness.dsmo
    run_id = await harness.start(chat(**{"nodes.reply.next": None}))
    assert await asyncio.to_thread(channel.entered.wait, 30), "send_message never started"
    # The candidate answers in the second the message takes to go out.
    ack = await dsmo.respond(run_id, "¡sí!", event_id="wa-981")
    assert ack.buffered
    channel.gate.set()
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.variables["lastResponse"] == "¡sí!"
    events = await dsmo.events(run_id)
    assert [(e.type, e.stage) for e in of(events, "EVENT_BUFFERED", "EVENT_CONSUMED")] == [
        ("EVENT_BUFFERED", "greet"),
        ("EVENT_CONSUMED", "reply"),
    ]
    await harness.replay_all()


async def test_a_kept_event_expires_after_its_time_to_live(harness: Harness) -> None:
    """An upload kept for 2 s expires while the reply wait lasts 6 s; the request after it times out.

    On the real server, in seconds: the time-skipping server's sleep call, skipping hours, could
    outlast its deadline and break its connection on a busy machine. When the event expired is
    checked against the TTL (never before it); how late the timer fired is the server's, not asserted.
    """
    definition = chat(
        inbox={"ttl": "2s"},
        **{
            "nodes.reply.parameters": {"timeout": "6s", "onTimeout": "continue"},
            "nodes.docs.parameters": {"documents": ["id_card"], "timeout": "2s", "onTimeout": "continue"},
            "nodes.docs.next": None,
        },
    )
    dsmo = harness.dsmo
    run_id = await harness.start(definition)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.signal_event(run_id, "DOCUMENT_UPLOADED", {"event_id": "up-1", "document": "id_card", "url": "s3://i"})
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and "documentUrls" not in result.variables
    events = await dsmo.events(run_id)
    [buffered] = of(events, "EVENT_BUFFERED")
    [expired] = of(events, "EVENT_EXPIRED")
    assert expired.data["eventId"] == "up-1" and expired.data["reason"] == "its time-to-live ended"
    assert expired.at - buffered.at >= timedelta(seconds=2)
    assert not of(events, "EVENT_CONSUMED")
    assert [e.data["eventType"] for e in of(events, "RUN_RESUMED")] == ["TIMEOUT", "TIMEOUT"]


async def test_runs_under_the_old_rule_replay_and_new_runs_take_the_inbox(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsmo = harness.dsmo
    definition = chat(**{"nodes.reply.next": None})
    with older_code(monkeypatch):
        old = await harness.start(definition)
        await dsmo.wait_for_status(old, {RunStatus.WAITING})
        # Before the inbox, a reply from another sender was taken and a signal nothing takes now
        # was refused: the old rule stays in force for this run.
        await dsmo.signal_event(old, "EVENT_COMPLETED", {"event_id": "cal-1", "result": "done"})
        await dsmo.signal_event(old, "MESSAGE_RECEIVED", {"event_id": "m-1", "text": "hi", "from": "someone"})
        result = await dsmo.result(old)
    assert result.status is RunStatus.COMPLETED and result.variables["lastResponse"] == "hi"
    assert not await has_patch_marker(harness, old, INBOX_PATCH)
    await replays(harness, old)

    new = await harness.start(chat())
    await dsmo.wait_for_status(new, {RunStatus.WAITING})
    assert (await deliver(dsmo, new, "EVENT_COMPLETED", {"result": "done"}, "cal-1")).buffered
    assert await takes_change(harness, new, INBOX_PATCH)


async def test_a_run_started_with_its_first_events_takes_them_without_a_race(harness: Harness) -> None:
    dsmo = harness.dsmo
    events = [
        {"type": "MESSAGE_RECEIVED", "event_id": "wa-1", "data": {"text": "hola, sí"}},
        {"type": "DOCUMENT_UPLOADED", "event_id": "up-1", "data": {"document": "id_card", "url": "s3://d/i"}},
        {"type": "DOCUMENT_UPLOADED", "event_id": "up-2", "data": {"document": "payslip", "url": "s3://d/p"}},
    ]
    run_id = (await dsmo.start(chat(), task_queue=harness.task_queue, events=events)).run_id
    harness.started.append(run_id)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    view = await until_value(
        lambda: dsmo.status(run_id),
        lambda view: view.waiting_for == "event",
        "the run waits for the event",
        seconds=120,
    )
    assert view.current_node == "meeting" and view.inbox is None, view
    trail = await dsmo.events(run_id)
    consumed = [e.data["eventId"] for e in of(trail, "EVENT_CONSUMED")]
    # The first came with the start, so the inbox had it before the first wait. A document that
    # arrives after the document wait began is taken by the wait directly, not from the inbox.
    assert consumed[0] == "wa-1" and set(consumed) <= {"wa-1", "up-1", "up-2"}
    resumed = of(trail, "RUN_RESUMED")[-1]
    assert resumed.data["eventId"] == "up-2" and resumed.data["set"]["documentUrls"] == ["s3://d/i", "s3://d/p"]
    # The first event came with the start itself: an update accepted in the run's first workflow task.
    history = [e async for e in dsmo.temporal.get_workflow_handle(run_id).fetch_history_events()]
    first_task_done = next(
        i for i, e in enumerate(history) if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    )
    accepted = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    assert any(e.event_type == accepted for e in history[: first_task_done + 2])
    await deliver(dsmo, run_id, "EVENT_COMPLETED", {"result": "done"}, "cal-1")
    assert (await dsmo.result(run_id)).variables["lastResponse"] == "hola, sí"

    # An event no wait of the definition takes refuses the start: no run exists afterwards.
    with pytest.raises(EventNotAccepted, match=r"events\.1: no wait of inbox-chat takes SIGNATURE_COMPLETED"):
        await dsmo.start(
            chat(),
            run_id="inbox-chat-refused",
            task_queue=harness.task_queue,
            events=[events[0], {"type": "SIGNATURE_COMPLETED", "data": {"signedDocumentUrl": "s3://s"}}],
        )
    with pytest.raises(RunNotFound):
        await dsmo.status("inbox-chat-refused")
