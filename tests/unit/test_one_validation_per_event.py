"""One validation per event: `well_formed` alone judges an event's shape, every way in asks it once
before anything is sent or written and gets the same words, and only intake notes the ids a run took.

The ways in compared here without a stack: the run's own update validator and raw signal handler,
DsmoClient's `deliver_event` and `signal_event` (so the CLI, which calls them), and the ingress's
event route. tests/integration/server/test_same_answer_every_way_in.py sends the same events to a
waiting run through the client, the ingress, the console's form, a raw update and a raw signal.
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, SimpleNamespace
from typing import Any

import httpx
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.exceptions import ApplicationError

from dsmo.client.client_errors import EventMalformed
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.server.api_keys import KeyStore
from dsmo.server.ingress.app import create_app
from dsmo.workflows.common import patches
from dsmo.workflows.engine.agent_execution import AgentExecution
from dsmo.workflows.events.resume_events import EventAck, EventRejected, well_formed
from dsmo.workflows.run.signal_rules import well_formed_signal

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("dsmo",)
VALIDATOR = "dsmo/workflows/events/resume_events.py"
RUN_SIDE = {"dsmo/workflows/engine/agent_execution.py", "dsmo/workflows/run/signal_rules.py"}


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"k": value}
    return value


# (name, type, event_id, data): each breaks one rule, or two (the strict one is the answer).
MALFORMED = [
    ("missing field", "MESSAGE_RECEIVED", "e1", {"txt": "typo"}),
    ("empty text", "MESSAGE_RECEIVED", "e1", {"text": ""}),
    ("score not a number", "TEST_COMPLETED", "e1", {"score": "high", "result": "x"}),
    ("unknown type", "DOCUMENT_SHREDDED", "e1", {}),
    ("id with a newline", "MESSAGE_RECEIVED", "e1\n", {"text": "hi"}),
    ("id too long", "MESSAGE_RECEIVED", "e" * 201, {"text": "hi"}),
    ("data nested 40 deep", "EVENT_COMPLETED", "e1", {"data": _deep(40)}),
    ("lone surrogate", "MESSAGE_RECEIVED", "e1", {"text": "a\ud800"}),
    ("bad id and missing field", "MESSAGE_RECEIVED", " e1", {"txt": "typo"}),
    ("deep data and a bad score", "TEST_COMPLETED", "e1", {"score": "high", "result": "x", "n": _deep(40)}),
]
# Above MAX_EVENT_BYTES: the ingress's body cap answers it first (413), every other way alike.
OVERSIZED = ("oversized data", "EVENT_COMPLETED", "e1", {"data": {"blob": "x" * 70_000}})


class Temporal:
    """Stands in for Temporal: records what the client sends (a malformed event must send nothing)."""

    namespace = "default"

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.workflow_service = SimpleNamespace(describe_task_queue=self._describe_task_queue)

    async def _describe_task_queue(self, request: Any) -> Any:
        # A worker polls every queue: the client asks before it sends an event (no worker: 503).
        polled = Timestamp()
        polled.GetCurrentTime()
        return SimpleNamespace(pollers=[SimpleNamespace(identity="worker-1", last_access_time=polled)])

    def get_workflow_handle(self, run_id: str) -> Any:
        async def execute_update(name: str, event: dict[str, Any], **_: Any) -> EventAck:
            self.sent.append((name, event))
            return EventAck(event_id=event["event_id"], accepted=True, status="waiting")

        async def signal(name: str, payload: Any) -> None:
            self.sent.append((name, payload))

        async def describe() -> Any:
            # Asked before an event is sent (is the run open, and its queue polled?), and when
            # tracing is on (another test in the session may have turned it on): an open run
            # with no trace in its memo.
            async def memo() -> dict[str, Any]:
                return {}

            return SimpleNamespace(memo=memo, close_time=None, task_queue="dsmo")

        return SimpleNamespace(execute_update=execute_update, signal=signal, describe=describe)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(state_dir=tmp_path)


@pytest.fixture
def temporal() -> Temporal:
    return Temporal()


@pytest.fixture
def ingress(settings: Settings, temporal: Temporal) -> Iterator[httpx.AsyncClient]:
    key = KeyStore(settings.api_keys_path).add("crm", ["events:*"])
    app = create_app(settings)
    app.state.dsmo = DsmoClient(temporal, settings)  # type: ignore[arg-type]  # what the lifespan would open
    transport = httpx.ASGITransport(app=app)
    yield httpx.AsyncClient(transport=transport, base_url="http://ingress", headers={"Authorization": f"Bearer {key}"})


# -- the run's own answers ----------------------------------------------------------------------


def run_validator_answer(event_type: str, event_id: str, data: Any) -> str:
    """What the `deliver_event` update's validator answers (before intake: the event is malformed)."""
    envelope = {"type": event_type, "event_id": event_id, "data": data}
    with pytest.raises(ApplicationError) as refused:
        AgentExecution._validate_event(SimpleNamespace(_run=None), envelope)  # type: ignore[arg-type]
    return refused.value.message


def run_signal_answer(event_type: str, payload: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """What a new run's raw signal handler records as the reason of its EVENT_REJECTED."""
    monkeypatch.setattr(patches, "patched", lambda change: True)  # a run started on this code
    with pytest.raises(EventRejected) as refused:
        well_formed_signal(event_type, payload)
    return str(refused.value)


async def ingress_answer(ingress: httpx.AsyncClient, event_type: str, event_id: str, data: Any) -> tuple[int, str]:
    body = json.dumps({"type": event_type, "event_id": event_id, "data": data})  # \ud800 travels escaped
    answer = await ingress.post("/executions/run-1/events", content=body, headers={"Content-Type": "application/json"})
    return answer.status_code, answer.json()["error"]["message"]


# -- every way in, the same words -----------------------------------------------------------------


@pytest.mark.parametrize(("name", "event_type", "event_id", "data"), MALFORMED, ids=[case[0] for case in MALFORMED])
async def test_every_way_in_refuses_a_malformed_event_in_the_runs_own_words(
    name: str,
    event_type: str,
    event_id: str,
    data: dict[str, Any],
    settings: Settings,
    temporal: Temporal,
    ingress: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answer = run_validator_answer(event_type, event_id, data)
    assert "\n" not in answer and answer.split(":")[0].split(".")[0] in (event_type, "event")

    assert run_signal_answer(event_type, {"event_id": event_id, **data}, monkeypatch) == answer
    client = DsmoClient(temporal, settings)  # type: ignore[arg-type]
    with pytest.raises(EventMalformed) as by_update:
        await client.deliver_event("run-1", event_type, data, event_id=event_id)
    assert str(by_update.value.problem) == answer and str(by_update.value) == f"{event_type} rejected: {answer}"
    with pytest.raises(EventMalformed) as by_signal:
        await client.signal_event("run-1", event_type, {"event_id": event_id, **data})
    assert str(by_signal.value) == f"{event_type} rejected: {answer}"
    assert await ingress_answer(ingress, event_type, event_id, data) == (422, answer)
    assert temporal.sent == []  # refused before the round trip, by every way in


async def test_oversized_data_is_refused_alike_where_the_body_cap_does_not_answer_first(
    settings: Settings, temporal: Temporal, ingress: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, event_type, event_id, data = OVERSIZED
    answer = run_validator_answer(event_type, event_id, data)
    assert "above the 65536-byte limit" in answer
    assert run_signal_answer(event_type, {"event_id": event_id, **data}, monkeypatch) == answer
    with pytest.raises(EventMalformed) as refused:
        await DsmoClient(temporal, settings).deliver_event("run-1", event_type, data, event_id=event_id)  # type: ignore[arg-type]
    assert str(refused.value.problem) == answer
    status, _ = await ingress_answer(ingress, event_type, event_id, data)
    assert status == 413 and temporal.sent == []


async def test_a_number_json_cannot_hold_is_refused_alike_and_the_ingress_refuses_its_body_unparsed(
    settings: Settings, temporal: Temporal, ingress: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    event_type, data = "TEST_COMPLETED", {"score": float("nan"), "result": "x"}
    answer = run_validator_answer(event_type, "e1", data)
    assert answer == "TEST_COMPLETED.data.score: NaN is not a JSON number"
    assert run_signal_answer(event_type, {"event_id": "e1", **data}, monkeypatch) == answer
    client = DsmoClient(temporal, settings)  # type: ignore[arg-type]
    for send in (
        client.deliver_event("run-1", event_type, data, event_id="e1"),
        client.signal_event("run-1", event_type, {"event_id": "e1", **data}),
    ):
        with pytest.raises(EventMalformed) as refused:
            await send
        assert str(refused.value) == f"{event_type} rejected: {answer}"
    assert await ingress_answer(ingress, event_type, "e1", data) == (400, "data.score: NaN is not a JSON number")
    assert temporal.sent == []


async def test_a_bad_id_in_the_body_or_in_the_idempotency_key_header_gets_the_same_answer(
    ingress: httpx.AsyncClient,
) -> None:
    event = {"type": "MESSAGE_RECEIVED", "data": {"text": "hi"}}
    in_body = await ingress.post("/executions/run-1/events", json={**event, "event_id": "e" * 201})
    in_header = await ingress.post("/executions/run-1/events", json=event, headers={"Idempotency-Key": "e" * 201})
    assert in_body.status_code == in_header.status_code == 422
    assert in_body.json() == in_header.json()
    assert in_body.json()["error"]["code"] == "invalid_event"


# -- asked once ----------------------------------------------------------------------------------


@contextmanager
def calls_of(function: Any) -> Iterator[list[str]]:
    """The calls of ``function`` while the block runs, however it was imported (a profiler, no patch)."""
    code, seen = function.__code__, []

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event == "call" and frame.f_code is code:
            seen.append(frame.f_back.f_code.co_qualname if frame.f_back else "?")

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


async def test_an_event_through_the_ingress_is_judged_once_before_it_is_sent(
    ingress: httpx.AsyncClient, temporal: Temporal
) -> None:
    good = {"type": "MESSAGE_RECEIVED", "event_id": "e1", "data": {"text": "hola"}}
    with calls_of(well_formed) as asked:
        answer = await ingress.post("/executions/run-1/events", json=good)
    assert answer.status_code == 202, answer.text
    assert asked == ["check_event"]  # DsmoClient's pre-check alone; the ingress asks nothing itself
    assert temporal.sent == [("deliver_event", good)]

    with calls_of(well_formed) as asked:
        answer = await ingress.post("/executions/run-1/events", json={**good, "data": {"txt": "typo"}})
    assert answer.status_code == 422 and asked == ["check_event"]
    assert len(temporal.sent) == 1  # the malformed one was not sent


async def test_a_signal_through_the_client_is_judged_once_before_it_is_sent(
    settings: Settings, temporal: Temporal
) -> None:
    client = DsmoClient(temporal, settings)  # type: ignore[arg-type]
    with calls_of(well_formed) as asked:
        await client.signal_event("run-1", "MESSAGE_RECEIVED", {"event_id": "s1", "text": "hola"})
    assert asked == ["parse_signal"] and temporal.sent == [("MESSAGE_RECEIVED", {"event_id": "s1", "text": "hola"})]


# -- one module holds the rules, one notes the ids -----------------------------------------------


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for root in SOURCES:
        for path in sorted((REPO / root).rglob("*.py")) if (REPO / root).is_dir() else [REPO / root]:
            yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text(), str(path))


def _names(tree: ast.Module) -> set[str]:
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    return used | imported


# What an event's shape is judged by: the event-id rule, the data's limits, the kinds' models.
SHAPE_RULES = {
    "event_id_problem",
    "EVENT_LIMITS",
    "MAX_EVENT_BYTES",
    "MessageReceived",
    "DocumentUploaded",
    "SignatureCompleted",
    "TestCompleted",
    "EventCompleted",
}
# Where those are defined, apart from the validator that applies them.
RULES_DEFINED = {"dsmo/workflows/common/identifiers.py", "dsmo/workflows/common/document_limits.py"}


def test_no_module_but_the_validator_applies_an_event_shape_rule() -> None:
    holders = {path: sorted(_names(tree) & SHAPE_RULES) for path, tree in _modules()}
    others = {path: rules for path, rules in holders.items() if rules and path not in RULES_DEFINED | {VALIDATOR}}
    assert others == {}, "an event's shape is judged by resume_events.well_formed alone"
    assert holders[VALIDATOR]
    # Nor does any module read a kind's model off EVENT_KINDS to validate with it.
    for path, tree in _modules():
        reads = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr == "payload"
            and isinstance(node.value, ast.Subscript)
            and "EVENT_KINDS" in ast.unparse(node.value)
        ]
        assert not reads or path == VALIDATOR, f"{path} validates with EVENT_KINDS[...].payload"


def test_only_the_client_and_the_run_ask_well_formed() -> None:
    """The CLI, the ingress and the console go through DsmoClient; none asks for itself."""
    asking = {
        path
        for path, tree in _modules()
        if path != VALIDATOR and _names(tree) & {"well_formed", "parse_update", "parse_signal"}
    }
    assert asking, "nobody asks well_formed?"
    assert all(path.startswith("dsmo/client/") or path in RUN_SIDE for path in asking), asking


def test_only_intake_notes_the_ids_a_run_took() -> None:
    writers: dict[str, list[str]] = {}
    for path, tree in _modules():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "seen_event_ids"
                and node.func.attr != "packed"  # a read, for the continue-as-new input
            ):
                writers.setdefault(path, []).append(node.func.attr)
            elif isinstance(node, ast.Assign | ast.AugAssign) and any(
                isinstance(target, ast.Attribute) and target.attr == "seen_event_ids"
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            ):
                writers.setdefault(path, []).append("=")
    # intake adds an id when the run takes an event; a new generation restores the window it carried.
    assert writers == {"dsmo/workflows/run/intake.py": ["add"], "dsmo/workflows/run/context.py": ["="]}


def test_well_formed_is_pure_and_says_where_the_problem_is() -> None:
    with pytest.raises(EventRejected) as refused:
        well_formed("TEST_COMPLETED", "e1", {"score": "high", "result": "x"})
    assert (refused.value.field, refused.value.reason) == ("score", "must be a number")
    assert str(refused.value) == "TEST_COMPLETED.score: must be a number"
    event = well_formed("TEST_COMPLETED", "e1", {"score": "87", "result": "passed"})
    assert event.data == {"score": 87, "result": "passed"}
    with pytest.raises(EventRejected, match=r"^EVENT_COMPLETED\.data: not JSON \(Object of type set"):
        well_formed("EVENT_COMPLETED", "e1", {"data": {"tags": {"a"}}})
