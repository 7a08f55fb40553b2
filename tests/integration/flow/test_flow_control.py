"""Per-key concurrency on the real stack: one run per conversation past PENDING, in line in order,
what a busy key does with a start, slots given back while waiting, and a terminated holder's slot
freed within the check interval."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsmo.activities.definition_store import DefinitionStore
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.client.client_errors import InvalidInputDocument, KeyBusy
from dsmo.client.definition_files import parse_definition_text
from dsmo.client.dsmo_client import DsmoClient
from dsmo.server.api_keys import KeyStore
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.contracts.run_records import StatusView
from dsmo.workflows.definition.model import AgentDefinition
from tests.conftest import Harness
from tests.ingress_server import serving
from tests.integration.server.test_ingress import call
from tests.polling import until, until_value

pytestmark = pytest.mark.asyncio

CHECK_SECONDS = 1  # how often a lock checks its holders here (the default is a minute)
FLOW_AGENTS = ProcessorRegistry()


@pytest.fixture
def registry() -> ProcessorRegistry:
    return FLOW_AGENTS


FLOW = """
agent: {agent}
inputs: [conversation, text]
concurrency:
  - {{key: "{{{{conversation.id}}}}", limit: 1{extra}}}
start: ask
nodes:
  ask:
    actionType: wait_for_response
    parameters: {{timeout: 1h, onTimeout: fail}}
    next: bye
  bye:
    actionType: send_message
    parameters: {{message: "got {{{{lastResponse}}}}"}}
"""


@pytest.fixture(autouse=True)
def quick_holder_checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # Read by the test's worker (its locks' activities) when the harness builds it.
    monkeypatch.setenv("DSMO_SLOT_HOLDER_CHECK_SECONDS", str(CHECK_SECONDS))
    yield


def _flow(extra: str = "") -> AgentDefinition:
    return parse_definition_text(FLOW.format(agent=f"flow-{uuid.uuid4().hex[:8]}", extra=extra))


def _client(harness: Harness) -> DsmoClient:
    settings = harness.dsmo.settings.with_changes(worker={"slot_holder_check_seconds": CHECK_SECONDS})
    return DsmoClient(harness.dsmo.temporal, settings)


def _input(conversation: str, text: str = "hola") -> dict[str, Any]:
    return {"conversation": {"id": conversation}, "text": text}


@contextlib.contextmanager
def _ingress(
    harness: Harness, tmp_path: Path, definitions: list[AgentDefinition], scopes: list[str]
) -> Iterator[httpx.Client]:
    """The ingress on the harness's task queue, the definitions published, a client with a key of ``scopes``."""
    for definition in definitions:
        DefinitionStore(harness.store).publish(definition)
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    token = KeyStore(settings.api_keys_path).add("chat", scopes)
    with serving(settings) as url, httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http:
        yield http


async def _status(harness: Harness, run_id: str, want: RunStatus) -> StatusView:
    return await until_value(lambda: harness.dsmo.status(run_id), lambda view: view.status is want, f"{run_id} {want}")


async def test_one_run_per_conversation_the_next_ones_wait_in_line_in_order(harness: Harness) -> None:
    dsmo, flow = _client(harness), _flow()
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    first = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).started
    assert (first.status, first.queued_behind) == ("running", None)
    second = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).started
    third = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).started
    other = (await dsmo.start(flow, _input(f"{conversation}-other"), task_queue=harness.task_queue)).started
    harness.started.extend(report.run_id for report in (first, second, third, other))
    assert (second.status, second.queued_behind, second.ahead) == ("pending", f"conversation.id={conversation}", 1)
    assert other.status == "running"  # another conversation is not held up

    await _status(harness, first.run_id, RunStatus.WAITING)
    await _status(harness, other.run_id, RunStatus.WAITING)
    reason = f"queued: conversation.id={conversation} allows 1 run(s) at once"
    # The status says where in line: each pending run asks the key's lock for its place.
    last = await until_value(
        lambda: dsmo.status(third.run_id),
        lambda view: view.pending_reason == f"{reason}; 2 of 2 in line",
        "the third run 2 of 2 in line",
    )
    assert last.status is RunStatus.PENDING and last.pending_reason == f"{reason}; 2 of 2 in line", last
    assert (await dsmo.status(second.run_id)).pending_reason == f"{reason}; 1 of 2 in line"

    # The first run ends: the second (not the third) gets the slot, and so on, in order.
    for run_id, after in ((first.run_id, second.run_id), (second.run_id, third.run_id)):
        await dsmo.respond(run_id, "listo")
        assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
        await _status(harness, after, RunStatus.WAITING)
    await dsmo.respond(third.run_id, "listo")
    await dsmo.respond(other.run_id, "listo")
    for run_id in (third.run_id, other.run_id):
        assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
    # Never two past PENDING at once: each run of the conversation took the slot after the one before ended.
    spans = []
    for report in (first, second, third):
        events = await dsmo.events(report.run_id)
        taken = next(e for e in events if e.type == "SLOT_TAKEN")
        assert taken.data == {"key": f"conversation.id={conversation}", "limit": 1}
        spans.append((taken.at, next(e.at for e in events if e.type == "RUN_COMPLETED")))
    assert spans[0][1] <= spans[1][0] and spans[1][1] <= spans[2][0], spans


async def test_a_start_for_a_busy_key_that_rejects_is_refused_naming_the_active_run(harness: Harness) -> None:
    dsmo, flow = _client(harness), _flow(", onBusy: reject")
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    active = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    harness.started.append(active)
    refused_id = f"{flow.agent}-refused"
    with pytest.raises(KeyBusy) as refused:
        await dsmo.start(flow, _input(conversation), run_id=refused_id, task_queue=harness.task_queue)
    assert refused.value.active_runs == [active]
    assert str(refused.value) == (
        f"concurrency.0: conversation.id={conversation} is busy: run {active} holds it (onBusy: reject)"
    )
    count = await harness.dsmo.temporal.count_workflows(f"WorkflowId = '{refused_id}'")
    assert count.count == 0  # nothing started
    await dsmo.cancel(active, reason="done")


async def test_a_start_for_a_busy_key_that_cancels_previous_replaces_the_active_run(harness: Harness) -> None:
    dsmo = _client(harness)
    # The conversation is the runs' data subject: its id is never in a trail in the clear.
    flow = parse_definition_text(
        FLOW.format(agent=f"flow-{uuid.uuid4().hex[:8]}", extra=", onBusy: cancel-previous")
        + 'subject: "{{conversation.id}}"\n'
    )
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    previous = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    await _status(harness, previous, RunStatus.WAITING)
    report = (await dsmo.start(flow, _input(conversation, "otra cosa"), task_queue=harness.task_queue)).started
    harness.started.extend([previous, report.run_id])
    assert report.cancelled == [previous]
    ended = await dsmo.result(previous)
    assert ended.status is RunStatus.CANCELLED
    assert ended.cancel_reason == f"replaced by run {report.run_id} for conversation.id (onBusy: cancel-previous)"
    trail = [event.model_dump(mode="json") for event in await dsmo.events(previous)]
    assert trail[-1]["data"]["cancelReason"] == ended.cancel_reason
    assert "SLOT_TAKEN" in str(trail) and conversation not in str(trail)
    await _status(harness, report.run_id, RunStatus.WAITING)  # it got the slot the cancelled run gave back
    await dsmo.cancel(report.run_id, reason="done")


async def test_a_start_that_cancels_previous_cancels_the_runs_in_line_too(harness: Harness) -> None:
    dsmo, agent = _client(harness), f"flow-{uuid.uuid4().hex[:8]}"
    # Two versions of one agent share its key's line: the first queues, the second replaces.
    queued, replacing = (
        parse_definition_text(FLOW.format(agent=agent, extra=extra)) for extra in ("", ", onBusy: cancel-previous")
    )
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    holder = (await dsmo.start(queued, _input(conversation), task_queue=harness.task_queue)).run_id
    harness.started.append(holder)
    await _status(harness, holder, RunStatus.WAITING)
    in_line = (await dsmo.start(queued, _input(conversation), task_queue=harness.task_queue)).run_id
    harness.started.append(in_line)
    report = (await dsmo.start(replacing, _input(conversation, "otra"), task_queue=harness.task_queue)).started
    harness.started.append(report.run_id)
    assert report.cancelled == [holder, in_line]
    for previous in (holder, in_line):
        ended = await dsmo.result(previous)
        assert ended.status is RunStatus.CANCELLED, previous
        assert ended.cancel_reason == f"replaced by run {report.run_id} for conversation.id (onBusy: cancel-previous)"
    # The run that replaced them gets the slot; the one that was in line never took it.
    await _status(harness, report.run_id, RunStatus.WAITING)
    assert "SLOT_TAKEN" not in [event.type for event in await dsmo.events(in_line)]
    await dsmo.cancel(report.run_id, reason="done")


async def test_starts_that_cancel_previous_at_once_each_start(harness: Harness) -> None:
    dsmo, flow = _client(harness), _flow(", onBusy: cancel-previous")
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    # Each may find a holder whose own start has claimed the slot but not created the run yet.
    starts = await asyncio.gather(
        *(dsmo.start(flow, _input(conversation, f"m{n}"), task_queue=harness.task_queue) for n in range(5)),
        return_exceptions=True,
    )
    assert not [start for start in starts if isinstance(start, BaseException)], starts
    run_ids = [start.run_id for start in starts if not isinstance(start, BaseException)]
    harness.started.extend(run_ids)
    assert len(set(run_ids)) == 5
    for run_id in run_ids:
        with contextlib.suppress(Exception):
            await dsmo.cancel(run_id, reason="done")


async def test_a_key_that_does_not_hold_while_waiting_lets_the_next_run_in(harness: Harness) -> None:
    dsmo, flow = _client(harness), _flow(", holdWhileWaiting: false")
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    runs = [(await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id for _ in range(2)]
    harness.started.extend(runs)
    for run_id in runs:  # both wait at once: a waiting run gave its slot back
        await _status(harness, run_id, RunStatus.WAITING)
    for run_id in runs:  # each takes the slot again to go on, one after the other
        await dsmo.respond(run_id, "sí")
    for run_id in runs:
        assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
        kinds = [e.type for e in await dsmo.events(run_id) if e.type.startswith("SLOT_")]
        assert kinds == ["SLOT_TAKEN", "SLOT_GIVEN_BACK", "SLOT_TAKEN"]


async def test_a_key_that_holds_while_waiting_keeps_the_next_run_pending(harness: Harness) -> None:
    dsmo, flow = _client(harness), _flow()
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    first = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    second = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    harness.started.extend([first, second])
    await _status(harness, first, RunStatus.WAITING)
    assert (await dsmo.status(second)).status is RunStatus.PENDING
    for run_id in (first, second):
        await dsmo.cancel(run_id, reason="done")


async def test_a_terminated_holder_s_slot_is_freed_within_the_check_interval(harness: Harness) -> None:
    dsmo, flow = _client(harness), _flow()
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    holder = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    await _status(harness, holder, RunStatus.WAITING)
    queued = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    harness.started.append(queued)
    await _status(harness, queued, RunStatus.PENDING)
    # Terminated around DSMO: the run never gives its slot back; its lock finds it gone.
    await harness.dsmo.temporal.get_workflow_handle(holder).terminate(reason="outside DSMO")
    await _status(harness, queued, RunStatus.WAITING)
    events = await dsmo.events(queued)
    # Within the documented bound (the check interval, plus the check itself): from the trail.
    await dsmo.cancel(queued, reason="done")
    assert events[-1].type == "RUN_WAITING"


async def test_a_start_without_the_key_s_value_is_refused_naming_the_field(harness: Harness) -> None:
    with pytest.raises(InvalidInputDocument, match=r"^input: concurrency\.0\.key: "):
        await harness.dsmo.start(_flow(), {"text": "sin conversación"}, task_queue=harness.task_queue)


async def test_the_ingress_says_what_became_of_a_start_for_a_busy_key(harness: Harness, tmp_path: Path) -> None:
    queueing, rejecting = _flow(), _flow(", onBusy: reject")
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    with _ingress(harness, tmp_path, [queueing, rejecting], ["start", "read"]) as http:
        answers = []
        for definition in (queueing, queueing, rejecting, rejecting):
            body = {"agent": definition.agent, "input": _input(conversation)}
            answers.append(await call("POST", http, "/executions", json=body))
        first, second, active, refused = answers
        harness.started.extend(answer.json()["runId"] for answer in (first, second, active))
        assert first.status_code == 201 and first.json()["flow"] == {
            "status": "running",
            "queuedBehind": None,
            "ahead": 0,
            "cancelled": [],
        }
        assert second.status_code == 201 and second.json()["flow"]["status"] == "pending"
        assert second.json()["flow"]["queuedBehind"] == f"conversation.id={conversation}"
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["code"] == "key_busy" and active.json()["runId"] in error["message"]
        missing = await call("POST", http, "/executions", json={"agent": queueing.agent, "input": {"text": "x"}})
        assert missing.status_code == 422 and missing.json()["error"]["message"].startswith("input: concurrency.0.key")
    for answer in (first, second, active):
        await harness.dsmo.cancel(answer.json()["runId"], reason="done")


CHAT = """
agent: {agent}
inputs: [conversation]
concurrency:
  - {{key: "{{{{conversation.id}}}}", onBusy: deliver}}
start: listen
nodes:
  listen:
    actionType: wait_for_response
    parameters: {{timeout: 1h, onTimeout: fail}}
    transitions:
      - {{when: 'lastResponse == "adiós"', to: bye}}
      - {{to: answer}}
  answer:
    actionType: send_message
    parameters: {{message: "got {{{{lastResponse}}}}"}}
    next: listen
  bye:
    actionType: send_message
    parameters: {{message: "bye"}}
"""


def _chat() -> AgentDefinition:
    return parse_definition_text(CHAT.format(agent=f"chat-{uuid.uuid4().hex[:8]}"))


def _said(text: str) -> list[dict[str, Any]]:
    return [{"type": "MESSAGE_RECEIVED", "data": {"text": text}}]


async def test_a_second_message_for_a_busy_conversation_goes_to_its_active_run(harness: Harness) -> None:
    dsmo, chat = _client(harness), _chat()
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    first = (await dsmo.start(chat, _input(conversation), task_queue=harness.task_queue, events=_said("hola"))).started
    harness.started.append(first.run_id)
    assert first.status == "running"
    second = (
        await dsmo.start(chat, _input(conversation), task_queue=harness.task_queue, events=_said("¿hay alguien?"))
    ).started
    # No second run: the active one took the message, as it takes a reply.
    assert (second.run_id, second.status) == (first.run_id, "delivered")
    assert second.acks[0].accepted
    third = (await dsmo.start(chat, _input(conversation), task_queue=harness.task_queue, events=_said("adiós"))).started
    assert third.run_id == first.run_id
    result = await dsmo.result(first.run_id)
    assert result.status is RunStatus.COMPLETED
    said = [message["message"] for message in harness.messages(first.run_id)]
    assert said == ["got hola", "got ¿hay alguien?", "bye"]
    count = await harness.dsmo.temporal.count_workflows(f"AgentName = '{chat.agent}'")
    assert count.count == 1


async def test_a_message_racing_the_end_of_the_active_run_is_taken_by_it_or_starts_a_new_one(
    harness: Harness,
) -> None:
    dsmo, chat = _client(harness), _chat()
    for round_ in range(4):
        conversation = f"c-{uuid.uuid4().hex[:6]}-{round_}"
        active = (
            await dsmo.start(chat, _input(conversation), task_queue=harness.task_queue, events=_said("hola"))
        ).started
        await _status(harness, active.run_id, RunStatus.WAITING)
        # The goodbye ends the active run while the next message is on its way to it.
        ending = dsmo.respond(active.run_id, "adiós", event_id=f"{active.run_id}-bye")
        racing = dsmo.start(chat, _input(conversation), task_queue=harness.task_queue, events=_said("otra"))
        if round_ % 2:  # sent in either order, both in flight at once
            _, raced = await asyncio.gather(ending, racing)
        else:
            raced, _ = await asyncio.gather(racing, ending)
        report = raced.started
        harness.started.extend({active.run_id, report.run_id})
        # Exactly one run took "otra": the active one (before its goodbye) or a new one.
        takers = []
        for run_id in {active.run_id, report.run_id}:
            if report.status != "delivered" and run_id == report.run_id:
                await _status(harness, run_id, RunStatus.WAITING)
            events = await harness.dsmo.events(run_id)
            texts = [e.data.get("set", {}).get("lastResponse") for e in events if e.type == "RUN_RESUMED"]
            takers += [run_id] * texts.count("otra")
        assert len(takers) == 1, (report, takers)
        assert (takers[0] == active.run_id) == (report.status == "delivered")
        if report.status != "delivered":
            await dsmo.cancel(report.run_id, reason="done")


async def test_the_ingress_delivers_a_second_message_to_the_active_run(harness: Harness, tmp_path: Path) -> None:
    chat = _chat()
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    with _ingress(harness, tmp_path, [chat], ["start", "read", "events:MESSAGE_RECEIVED"]) as http:
        answers = []
        for text in ("hola", "¿sigues ahí?"):
            body = {"agent": chat.agent, "input": _input(conversation), "events": _said(text)}
            answers.append(await call("POST", http, "/executions", json=body))
    first, second = answers
    assert first.status_code == 201 and first.json()["flow"]["status"] == "running"
    assert second.status_code == 200, second.text
    assert second.json()["runId"] == first.json()["runId"]
    assert second.json()["flow"]["status"] == "delivered" and second.json()["flow"]["acks"][0]["accepted"]
    run_id = first.json()["runId"]
    harness.started.append(run_id)
    await until(lambda: len(harness.messages(run_id)) == 2, "the active run has answered both")
    assert [m["message"] for m in harness.messages(run_id)] == ["got hola", "got ¿sigues ahí?"]
    await harness.dsmo.cancel(run_id, reason="done")


async def test_a_higher_priority_start_goes_ahead_in_a_key_s_line(harness: Harness) -> None:
    dsmo, flow = _client(harness), _flow()
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    holder = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    await _status(harness, holder, RunStatus.WAITING)
    low = [(await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue, priority=5)) for _ in range(2)]
    usual = await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)
    urgent = await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue, priority=1)
    # How many are ahead of each (the holder, then those in line before it by priority).
    assert [run.started.ahead for run in (*low, usual, urgent)] == [1, 2, 1, 1]
    line = [urgent.run_id, usual.run_id, *(run.run_id for run in low)]  # the order the key serves them in
    harness.started.extend([holder, *line])
    described = await harness.dsmo.temporal.get_workflow_handle(urgent.run_id).describe()
    assert described.raw_description.workflow_execution_info.priority.priority_key == 1  # Temporal's own
    for run_id in (holder, *line):
        await _status(harness, run_id, RunStatus.WAITING)
        await dsmo.respond(run_id, "ok")
        assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
    taken = [next(e.at for e in await dsmo.events(run_id) if e.type == "SLOT_TAKEN") for run_id in line]
    assert taken == sorted(taken)
    with pytest.raises(ValueError, match=r"^priority: 0 is not 1 \(highest\) to 5$"):
        await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue, priority=0)


DEBOUNCED = """
agent: {agent}
inputs: [order, inputs]
debounce: {{key: "{{{{order.id}}}}", period: 3s, mode: {mode}}}
start: note
nodes:
  note:
    actionType: send_message
    parameters: {{message: "{message}"}}
"""


async def test_starts_close_together_become_one_run_with_the_last_input(harness: Harness) -> None:
    dsmo = _client(harness)
    flow = parse_definition_text(
        DEBOUNCED.format(agent=f"deb-{uuid.uuid4().hex[:8]}", mode="last", message="order {{order.status}}")
    )
    order = f"o-{uuid.uuid4().hex[:6]}"
    reports = []
    for status in ("paid", "packed", "shipped"):
        reports.append(
            (await dsmo.start(flow, {"order": {"id": order, "status": status}}, task_queue=harness.task_queue)).started
        )
    other = (
        await dsmo.start(flow, {"order": {"id": f"{order}-b", "status": "paid"}}, task_queue=harness.task_queue)
    ).started
    run_ids = {report.run_id for report in reports}
    assert len(run_ids) == 1 and other.run_id not in run_ids  # every caller of the batch got its run's id
    assert [(report.status, report.gathered) for report in reports] == [
        ("debounced", 1),
        ("debounced", 2),
        ("debounced", 3),
    ]
    (run_id,) = run_ids
    harness.started.extend([run_id, other.run_id])
    result = await _result_once_started(harness, run_id)
    assert result.status is RunStatus.COMPLETED
    assert harness.messages(run_id)[0]["message"] == "order shipped"
    created = (await dsmo.events(run_id))[0]
    assert (created.data["debouncedStarts"], created.data["debounceKey"]) == (3, order)
    assert (await _result_once_started(harness, other.run_id)).status is RunStatus.COMPLETED
    # Started by the key's debouncer, for this code: it asks `workflow.patched` nothing.
    assert await harness.patch_markers(run_id) == []


async def test_starts_close_together_become_one_run_with_all_inputs(harness: Harness) -> None:
    dsmo = _client(harness)
    flow = parse_definition_text(
        DEBOUNCED.format(agent=f"deb-{uuid.uuid4().hex[:8]}", mode="all", message="{{inputs}}")
    )
    order = f"o-{uuid.uuid4().hex[:6]}"
    inputs = [{"order": {"id": order, "line": line}} for line in range(3)]
    # A start sent twice with its idempotency key (a retry after a lost answer) joins once.
    first, again = [
        (await dsmo.start(flow, inputs[0], task_queue=harness.task_queue, idempotency_key=f"{order}-0")).started
        for _ in range(2)
    ]
    assert (
        (again.run_id, again.status, again.gathered)
        == (first.run_id, "debounced", first.gathered)
        == (
            first.run_id,
            "debounced",
            1,
        )
    )
    # Another input under the same key is a start of its own: it joins, never dropped as a retry.
    later = [
        (await dsmo.start(flow, data, task_queue=harness.task_queue, idempotency_key=key)).started
        for data, key in ((inputs[1], f"{order}-0"), (inputs[2], None))
    ]
    assert [report.gathered for report in later] == [2, 3]
    run_ids = {report.run_id for report in (first, *later)}
    (run_id,) = run_ids
    harness.started.append(run_id)
    result = await _result_once_started(harness, run_id)
    assert result.status is RunStatus.COMPLETED and result.variables["inputs"] == inputs
    with pytest.raises(InvalidInputDocument, match=r"^input: debounce\.key: "):
        await dsmo.start(flow, {"order": {}}, task_queue=harness.task_queue)
    with pytest.raises(ValueError, match=r"^run_id: a debounced start takes none"):
        await dsmo.start(flow, inputs[0], run_id=f"{flow.agent}-mine", task_queue=harness.task_queue)
    plain = parse_definition_text(FLOW.format(agent=f"flow-{uuid.uuid4().hex[:8]}", extra=""))
    with pytest.raises(ValueError, match=r"^idempotency_key: only a debounced start takes one"):
        await dsmo.start(plain, _input(order), task_queue=harness.task_queue, idempotency_key="k")


async def test_a_debounced_start_retried_over_http_joins_its_batch_once(harness: Harness, tmp_path: Path) -> None:
    flow = parse_definition_text(
        DEBOUNCED.format(agent=f"deb-{uuid.uuid4().hex[:8]}", mode="all", message="{{inputs}}")
    )
    order = f"o-{uuid.uuid4().hex[:6]}"
    body = {"agent": flow.agent, "input": {"order": {"id": order, "line": 0}}}
    with _ingress(harness, tmp_path, [flow], ["start", "read", "events:MESSAGE_RECEIVED"]) as http:
        # The first answer was lost on the way back: the client sends the same start again.
        # Then another body under the same key: a start of its own, never dropped as a retry.
        other = {"agent": flow.agent, "input": {"order": {"id": order, "line": 1}}}
        answers = [
            await asyncio.to_thread(http.post, "/executions", json=sent, headers={"Idempotency-Key": f"{order}-0"})
            for sent in (body, body, other)
        ]
        # What a debounced start cannot take is named, as any invalid body is (it was a 500).
        for field, value in (("runId", f"{flow.agent}-mine"), ("events", [{"type": "MESSAGE_RECEIVED"}])):
            refused = await asyncio.to_thread(http.post, "/executions", json={**body, field: value})
            assert refused.status_code == 422, refused.text
            assert refused.json()["error"] == {
                "code": "invalid_body",
                "message": f"{field}: a start of {flow.agent!r} (debounced) takes none; its batch's run has its own",
            }
    assert [answer.status_code for answer in answers] == [202, 202, 202], [answer.text for answer in answers]
    (run_id,) = {answer.json()["runId"] for answer in answers}
    assert [answer.json()["flow"]["gathered"] for answer in answers] == [1, 1, 2]
    harness.started.append(run_id)
    result = await _result_once_started(harness, run_id)
    assert result.status is RunStatus.COMPLETED and result.variables["inputs"] == [body["input"], other["input"]]


async def test_waiting_for_a_batch_s_run_that_is_never_started_ends_once_its_debouncer_has(harness: Harness) -> None:
    from dsmo.client.client_errors import RunNotFound

    dsmo = _client(harness)
    flow = parse_definition_text(
        DEBOUNCED.format(agent=f"deb-{uuid.uuid4().hex[:8]}", mode="last", message="never").replace("3s", "1h")
    )
    started = await dsmo.start(flow, {"order": {"id": "o-9"}}, task_queue=harness.task_queue)
    assert started.started.status == "debounced" and started.started.debouncer
    # The debouncer goes before its batch is quiet (terminated by an operator, say).
    await harness.dsmo.temporal.get_workflow_handle(started.started.debouncer).terminate("test: gone")
    with pytest.raises(RunNotFound, match="was never started: its batch's debouncer"):
        await started.result()


async def _result_once_started(harness: Harness, run_id: str) -> Any:
    from dsmo.client.client_errors import RunNotFound

    async def result() -> Any:
        try:
            return await harness.dsmo.result(run_id)
        except RunNotFound:
            return None

    # The run starts once its key is quiet for the period.
    return await until_value(result, lambda result: result is not None, f"{run_id} started and ended")


GATE = threading.Event()


@FLOW_AGENTS.register("flow-think", "1.0.0")
def _think(document: Any, message: StageMessage) -> ProcessorOutput:
    GATE.wait(timeout=60)  # held while the test sends the next messages
    return ProcessorOutput(document={"thought": True}, summary={"thought": True})


THINKING_CHAT = CHAT.replace("      - {{to: answer}}\n", "      - {{to: think}}\n").replace(
    "  answer:\n", "  think:\n    actionType: run_agent\n    agent: flow-think\n    next: answer\n  answer:\n"
)


async def test_a_delivered_message_the_active_run_never_takes_starts_a_run_of_its_own(harness: Harness) -> None:
    dsmo = _client(harness)
    chat = parse_definition_text(THINKING_CHAT.format(agent=f"chat-{uuid.uuid4().hex[:8]}"))
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    GATE.clear()
    try:
        first = (
            await dsmo.start(chat, _input(conversation), task_queue=harness.task_queue, events=_said("hola"))
        ).started
        harness.started.append(first.run_id)
        await until_value(
            lambda: dsmo.events(first.run_id),
            lambda trail: any(e.type == "STAGE_ENQUEUED" for e in trail),
            'the run thinks about "hola"',
        )
        # Two more messages while it thinks: both kept; the first of them ends the conversation.
        bye = (
            await dsmo.start(chat, _input(conversation), task_queue=harness.task_queue, events=_said("adiós"))
        ).started
        more = (
            await dsmo.start(chat, _input(conversation), task_queue=harness.task_queue, events=_said("otra"))
        ).started
        assert (bye.status, more.status) == ("delivered", "delivered")
    finally:
        GATE.set()
    assert (await dsmo.result(first.run_id)).status is RunStatus.COMPLETED
    expired = [e for e in await dsmo.events(first.run_id) if e.type == "EVENT_EXPIRED"]
    assert len(expired) == 1 and expired[0].data.get("handedOnTo"), [
        (e.type, e.data) for e in await dsmo.events(first.run_id)
    ][-6:]
    handed = expired[0].data["handedOnTo"]
    harness.started.append(handed)
    await until(lambda: bool(harness.messages(handed)), 'the new run has answered "otra"')
    assert [m["message"] for m in harness.messages(handed)] == ["got otra"]
    assert [m["message"] for m in harness.messages(first.run_id)] == ["got hola", "bye"]
    created = next(e for e in await dsmo.events(handed) if e.type == "RUN_CREATED")
    assert created.data["handedOnEvent"] == expired[0].data["eventId"]
    await dsmo.cancel(handed, reason="done")
    assert (await dsmo.result(handed)).status is RunStatus.CANCELLED
    # Started by the run that handed it on, for this code: it asks `workflow.patched` nothing.
    assert await harness.patch_markers(handed) == []


async def test_a_holder_reset_outside_dsmo_keeps_its_slot_and_the_line_moves_on(harness: Harness) -> None:
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.enums.v1 import EventType
    from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest

    dsmo, flow = _client(harness), _flow()
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    holder = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    await _status(harness, holder, RunStatus.WAITING)
    queued = (await dsmo.start(flow, _input(conversation), task_queue=harness.task_queue)).run_id
    harness.started.extend([holder, queued])
    handle = harness.dsmo.temporal.get_workflow_handle(holder)
    history = await handle.fetch_history()
    first_task = next(
        e.event_id for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    )
    # `temporal workflow reset` to the holder's first workflow task: a new Temporal run, same id.
    await harness.dsmo.temporal.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=harness.dsmo.temporal.namespace,
            workflow_execution=WorkflowExecution(workflow_id=holder),
            reason="reset outside DSMO",
            workflow_task_finish_event_id=first_task,
            request_id=uuid.uuid4().hex,
        )
    )
    await _status(harness, holder, RunStatus.WAITING)
    await asyncio.sleep(CHECK_SECONDS * 3)  # several holder checks: the reset run still holds the key
    assert (await dsmo.status(queued)).status is RunStatus.PENDING
    await dsmo.respond(holder, "ok")
    assert (await dsmo.result(holder)).status is RunStatus.COMPLETED
    await _status(harness, queued, RunStatus.WAITING)  # the slot went on when the reset run ended
    await dsmo.cancel(queued, reason="done")


async def test_a_burst_of_starts_on_one_key_all_start(harness: Harness) -> None:
    """More simultaneous claims on one lock than Temporal lets it take at once (10 on a dev server):
    those it refuses are asked again, and every start goes through."""
    dsmo = _client(harness)
    flow = parse_definition_text(
        FLOW.format(agent=f"flow-{uuid.uuid4().hex[:8]}", extra="").replace("limit: 1", "limit: 100")
    )
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    handles = await asyncio.gather(
        *(dsmo.start(flow, _input(conversation), task_queue=harness.task_queue) for _ in range(30))
    )
    reports = [handle.started for handle in handles]
    harness.started.extend(report.run_id for report in reports)
    assert [report.status for report in reports] == ["running"] * 30
    for report in reports:
        await _status(harness, report.run_id, RunStatus.WAITING)
        await dsmo.cancel(report.run_id, reason="done")


async def test_a_group_key_holds_runs_of_two_agents_in_one_line(harness: Harness) -> None:
    dsmo, group = _client(harness), f"group:pay-{uuid.uuid4().hex[:6]}"
    refund, cancel = (_flow(f', scope: "{group}"') for _ in range(2))
    assert refund.agent != cancel.agent
    conversation = f"c-{uuid.uuid4().hex[:6]}"
    first = (await dsmo.start(refund, _input(conversation), task_queue=harness.task_queue)).run_id
    other = (await dsmo.start(cancel, _input(conversation), task_queue=harness.task_queue)).started
    harness.started.extend([first, other.run_id])
    assert other.status == "pending"  # another agent, the same customer: the same line
    await _status(harness, first, RunStatus.WAITING)
    await dsmo.respond(first, "ok")
    await _status(harness, other.run_id, RunStatus.WAITING)
    await dsmo.cancel(other.run_id, reason="done")
