"""The bad-input battery: one table of named cases across every way in, each refused cleanly.

Ways in: definition files (through `dsmo definitions publish`), resume events (through the
`deliver_event` update, DsmoClient signals and raw envelopes), `dsmo` arguments, and HTTP
bodies sent to the ingress. Every case must

- be refused with one line that names the field and says why (no traceback);
- write nothing: the waiting target run's history does not grow, no run is started, no
  definition is published;
- break nothing: after the whole battery the target still resumes on a good event and completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import io
import json
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
import pytest_asyncio

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.definition_store import DefinitionStore, index_key
from dsmo.activities.messaging import FileChannel
from dsmo.activities.plugin_errors import UnknownAgent
from dsmo.cli.main import _main as dsmo_cli
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.server.api_keys import KeyStore
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.ingress_server import serving
from tests.polling import until_value

pytestmark = pytest.mark.integration

DELETE = object()

# A valid definition every definition case breaks in one place.
BASE: dict[str, Any] = {
    "agent": "battery",
    "inputs": ["customer", "text"],
    "start": "greet",
    "config": {"minWords": 1},
    "nodes": {
        "greet": {
            "actionType": "send_message",
            "parameters": {"to": "{{customer.phone}}", "message": "Hi {{customer.name}}"},
            "next": "wait",
        },
        "wait": {"actionType": "wait_for_response", "parameters": {"timeout": "2d"}, "next": "score"},
        "score": {
            "actionType": "run_agent",
            "agent": "text-extract",
            "transitions": [
                {"when": "stages.score.summary.wordCount >= config.minWords", "to": "done"},
                {"to": "done"},
            ],
        },
        "done": {"actionType": "send_message", "parameters": {"to": "{{customer.phone}}", "message": "Bye"}},
    },
}


@dataclass(frozen=True)
class Case:
    name: str
    way: str  # definition | event | cli | http
    bad: Any  # what is sent; its shape depends on the way in
    expect: tuple[str, ...]  # fragments of the one-line error: the field, then the reason
    extra: dict[str, Any] = field(default_factory=dict)


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"k": value}
    return value


def definition_case(name: str, path: str, value: Any, *expect: str) -> Case:
    return Case(name, "definition", (path, value), expect)


def event(name: str, event_type: str, data: Any, *expect: str, **extra: Any) -> Case:
    return Case(name, "event", (event_type, data), expect, extra)


def cli(name: str, args: list[str], *expect: str) -> Case:
    return Case(name, "cli", args, expect)


def http(name: str, method: str, path: str, body: Any, status: int, *expect: str, **extra: Any) -> Case:
    return Case(name, "http", (method, path, body), (str(status), *expect), extra)


CASES = [
    # -- definitions --------------------------------------------------------------------------
    definition_case("unknown action", "nodes.greet.actionType", "teleport", "nodes.greet.actionType", "unknown action"),
    definition_case("missing action", "nodes.greet.actionType", DELETE, "nodes.greet.actionType", "is required"),
    definition_case("cycle with no exit", "nodes.done.next", "wait", "nodes.done", "no path to an end node"),
    definition_case(
        "wait timeout above the maximum", "nodes.wait.parameters.timeout", "8d", "timeout", "maximum of 7d"
    ),
    definition_case("timeout not a duration", "nodes.wait.parameters.timeout", "soon", "timeout", "invalid duration"),
    definition_case("negative timeout", "nodes.wait.parameters.timeout", "-5m", "timeout", "invalid duration"),
    definition_case("zero timeout", "nodes.wait.parameters.timeout", "0s", "timeout", "greater than zero"),
    definition_case("stage timeout not a duration", "nodes.score.timeout", "100y", "nodes.score.timeout", "invalid"),
    definition_case(
        "condition syntax", "nodes.score.transitions.0.when", "confidence >>> 1", "transitions.0.when", "compile"
    ),
    definition_case("condition unknown field", "nodes.score.transitions.0.when", "ghost > 1", "when", "'ghost'"),
    definition_case(
        "condition unknown config key", "nodes.score.transitions.0.when", "config.maxWords > 1", "when", "'maxWords'"
    ),
    definition_case(
        "condition unknown stage", "nodes.score.transitions.0.when", "stages.nope.status == 'ok'", "when", "'nope'"
    ),
    definition_case(
        "condition calls code", "nodes.score.transitions.0.when", "__import__('os') == 1", "when", "unknown function"
    ),
    definition_case(
        "template to a missing variable", "nodes.greet.parameters.message", "Hi {{ghost.name}}", "message", "'ghost'"
    ),
    definition_case(
        "template to an unknown stage", "nodes.score.input", "{{stages.nope.outputUri}}", "input", "'nope'"
    ),
    definition_case("template syntax", "nodes.greet.parameters.message", "{{ 1+1 }}", "message", "invalid placeholder"),
    definition_case("next to an unknown node", "nodes.greet.next", "nowhere", "nodes.greet.next", "unknown node"),
    definition_case(
        "condition nests six comprehensions",
        "nodes.score.transitions.0.when",
        "size(" + "".join(f"customer.tags.map(a{i}, " for i in range(6)) + "1" + ")" * 6 + ") > 0",
        "transitions.0.when",
        "nests comprehensions 6 deep",
    ),
    definition_case(
        "condition over the cost budget",
        "nodes.score.transitions.0.when",
        " && ".join(["customer.tags.exists(a, customer.tags.exists(b, a == b))"] * 10),
        "transitions.0.when",
        "above the budget of 100,000",
    ),
    definition_case("definition nested 500 deep", "config.deep", _deep(500), "YAML/JSON", "levels deep"),
    definition_case("transition to an unknown node", "nodes.score.transitions.1.to", "nowhere", "1.to", "unknown node"),
    definition_case("next and transitions", "nodes.score.next", "done", "nodes.score.transitions", "either next"),
    definition_case("unknown start", "start", "ghost", "start", "unknown node"),
    definition_case("missing start", "start", DELETE, "start", "is required"),
    definition_case("unknown failSafe", "failSafe", "ghost", "failSafe", "unknown node"),
    definition_case("unknown field", "nodes.greet.colour", "red", "nodes.greet.colour", "not a known field"),
    definition_case("bad agent name", "agent", "Bad Name", "agent", "pattern"),
    definition_case("no nodes", "nodes", {}, "nodes", "at least 1"),
    definition_case("zero attempts", "nodes.score.retry", {"maxAttempts": 0}, "retry.maxAttempts", "greater than"),
    definition_case("backoff too steep", "nodes.score.retry", {"backoffCoefficient": 50}, "backoffCoefficient", "10"),
    definition_case("bad audit level", "auditLevel", "verbose", "auditLevel", "'essential'"),
    definition_case("zero rate limit", "rateLimit", {"maxConcurrent": 0}, "rateLimit.maxConcurrent", "greater"),
    definition_case("empty agent of a stage", "nodes.score.agent", "", "nodes.score.agent", "at least 1"),
    definition_case(
        "unreachable node",
        "nodes.island",
        {"actionType": "delay", "parameters": {"duration": "1m"}},
        "nodes.island",
        "unreachable",
    ),
    Case("not a mapping", "definition", "- just\n- a list", ("a definition is a mapping",)),
    Case("not YAML", "definition", "agent: [unclosed", ("not valid YAML/JSON", "line 1")),
    # -- events (to the waiting target run) ---------------------------------------------------
    event("unknown event type", "DOCUMENT_SHREDDED", {}, "event.type", "unknown event"),
    event("wrong kind of event", "DOCUMENT_UPLOADED", {"document": "id", "url": "s3://b/k"}, "waiting for response"),
    event("missing field", "MESSAGE_RECEIVED", {"txt": "typo"}, "MESSAGE_RECEIVED.text", "is required"),
    event("empty text", "MESSAGE_RECEIVED", {"text": ""}, "MESSAGE_RECEIVED.text", "at least 1"),
    event("text not a string", "MESSAGE_RECEIVED", {"text": 5}, "MESSAGE_RECEIVED.text", "string"),
    event("text too long", "MESSAGE_RECEIVED", {"text": "x" * 20_001}, "MESSAGE_RECEIVED.text", "at most 20000"),
    event("oversized payload", "EVENT_COMPLETED", {"data": {"blob": "x" * 70_000}}, "EVENT_COMPLETED.data", "limit"),
    event("text with a lone surrogate", "MESSAGE_RECEIVED", {"text": "a\ud800"}, "MESSAGE_RECEIVED", "Unicode"),
    event("data nested 900 deep", "EVENT_COMPLETED", {"data": _deep(900)}, "EVENT_COMPLETED.data", "levels deep"),
    event("score not a number", "TEST_COMPLETED", {"score": "high", "result": "x"}, "TEST_COMPLETED.score"),
    event("missing event_id", "MESSAGE_RECEIVED", {"text": "hi"}, "event_id", "is required", envelope={"event_id": ""}),
    event("event_id too long", "MESSAGE_RECEIVED", {"text": "hi"}, "event_id", "200", event_id="e" * 201),
    event("signal without event_id", "MESSAGE_RECEIVED", {"text": "hi"}, "event_id", "is required", via="signal"),
    event("signal with a bad field", "MESSAGE_RECEIVED", {"event_id": "s1"}, "MESSAGE_RECEIVED.text", via="signal"),
    event("wrong run", "MESSAGE_RECEIVED", {"text": "hi"}, "battery-no-such-run", "not found", run="no-such-run"),
    event("run not waiting", "MESSAGE_RECEIVED", {"text": "hi"}, "ended", run="closed"),
    event(
        "unknown envelope field",
        "MESSAGE_RECEIVED",
        {"text": "hi"},
        "event.extra",
        "not a known field",
        envelope={"extra": 1},
    ),
    event("data not an object", "MESSAGE_RECEIVED", ["hi"], "event.data", "JSON object", raw=True),
    # -- dsmo arguments -----------------------------------------------------------------------
    cli("--input not JSON", ["start", "{good}", "--input", "{not json"], "--input", "not valid JSON"),
    cli("--input not an object", ["start", "{good}", "--input", "[1, 2]"], "--input", "JSON object"),
    cli("--delay not a duration", ["start", "{good}", "--delay", "soonish"], "--delay", "invalid duration"),
    cli("--id escaping its prefix", ["start", "{good}", "--id", "../../etc"], "run id", "no '..'"),
    cli("--id too long", ["start", "{good}", "--id", "r" * 201], "run id", "1-200"),
    cli("--id with a trailing newline", ["start", "{good}", "--id", "run\n"], "run id", "1-200"),
    cli("--id with a NUL", ["start", "{good}", "--id", "run\x00x"], "run id", "1-200"),
    cli(
        "--input nested 900 deep",
        ["start", "{good}", "--input", '{"a":' * 900 + "1" + "}" * 900],
        "input.a",
        "levels deep",
    ),
    cli("--event-id with a newline", ["respond", "{target}", "hi", "--event-id", "e1\n"], "event_id", "printable"),
    cli("missing definition file", ["start", "{tmp}/nope.yaml"], "nope.yaml"),
    cli("status of an unknown run", ["status", "battery-no-such-run"], "battery-no-such-run", "not found"),
    cli("status with a traversal id", ["status", "../../secrets"], "run id", "no '..'"),
    cli("respond to an unknown run", ["respond", "battery-no-such-run", "hola"], "not found"),
    cli("respond with empty text", ["respond", "{target}", ""], "MESSAGE_RECEIVED.text"),
    cli(
        "events --data not JSON", ["events", "{target}", "--type", "MESSAGE_RECEIVED", "--data", "{x"], "--data", "JSON"
    ),
    cli("events --type unknown", ["events", "{target}", "--type", "SHREDDED"], "--type", "SHREDDED"),
    cli(
        "signal with a missing field",
        ["events", "{target}", "--type", "MESSAGE_RECEIVED", "--data", "{}", "--signal"],
        "MESSAGE_RECEIVED.text",
        "is required",
    ),
    cli("cancel without --reason", ["cancel", "{target}"], "--reason"),
    cli("keys with an unknown scope", ["keys", "add", "x", "--scope", "everything"], "--scope", "everything"),
    cli("key with a blank name", ["keys", "add", " ", "--scope", "read"], "NAME", "not a key name"),
    cli("event data without a type", ["events", "battery-no-such-run", "--data", '{"a": 1}'], "--data", "--type"),
    cli("replay of an unknown run", ["replay", "battery-no-such-run"], "battery-no-such-run", "not found"),
    # -- HTTP bodies --------------------------------------------------------------------------
    http("malformed JSON", "POST", "/executions", b"{not json", 400, "not JSON", "line 1, column 2"),
    http("unknown body field", "POST", "/executions", {"agent": "battery", "colour": "red"}, 422, "colour"),
    http("missing agent", "POST", "/executions", {"input": {}}, 422, "agent", "required"),
    http("runId escaping its prefix", "POST", "/executions", {"agent": "battery", "runId": "../x"}, 422, "runId"),
    http("input not an object", "POST", "/executions", {"agent": "battery", "input": [1]}, 422, "input"),
    http("unknown agent", "POST", "/executions", {"agent": "nobody-here"}, 404, "nobody-here"),
    http(
        "event of unknown type",
        "POST",
        "/executions/{target}/events",
        {"type": "SHREDDED", "event_id": "h1", "data": {}},
        422,
        "event.type",
        "unknown event",
    ),
    http(
        "event without an id",
        "POST",
        "/executions/{target}/events",
        {"type": "MESSAGE_RECEIVED", "data": {"text": "x"}},
        422,
        "Idempotency-Key",
    ),
    http(
        "event data not an object",
        "POST",
        "/executions/{target}/events",
        {"type": "MESSAGE_RECEIVED", "event_id": "h2", "data": [1]},
        422,
        "data",
    ),
    http(
        "event with a bad field",
        "POST",
        "/executions/{target}/events",
        {"type": "MESSAGE_RECEIVED", "event_id": "h3", "data": {"txt": "x"}},
        422,
        "MESSAGE_RECEIVED.text",
    ),
    http(
        "event of the wrong kind",
        "POST",
        "/executions/{target}/events",
        {"type": "TEST_COMPLETED", "event_id": "h4", "data": {"score": 1, "result": "ok"}},
        409,
        "waiting for response",
    ),
    http(
        "oversized body",
        "POST",
        "/executions/{target}/events",
        {"type": "MESSAGE_RECEIVED", "event_id": "h5", "data": {"text": "x" * 70_000}},
        413,
        "limit",
    ),
    http(
        "event for an unknown run",
        "POST",
        "/executions/battery-no-such-run/events",
        {"type": "MESSAGE_RECEIVED", "event_id": "h6", "data": {"text": "x"}},
        404,
        "not found",
    ),
    http("run id with '..'", "GET", "/executions/a..b", None, 422, "run id", "no '..'"),
    http("cancel without a reason", "POST", "/executions/{target}/cancel", {}, 422, "reason"),
    http("cancel with a blank reason", "POST", "/executions/{target}/cancel", {"reason": "   "}, 422, "reason"),
    http("no API key", "GET", "/executions/{target}", None, 401, "API key", key=None),
    # A version may be a label (any text): one shaped like a path or a query is looked up among the
    # agent's published hashes and labels, never used as a key, and names no version.
    http(
        "version as a path",
        "POST",
        "/executions",
        {"agent": "battery", "version": "../definitions/x"},
        404,
        "version",
        "no published version '../definitions/x'",
    ),
    http(
        "version with a query",
        "POST",
        "/executions",
        {"agent": "battery", "version": "abc.json?x="},
        404,
        "version",
        "no published version 'abc.json?x='",
    ),
    http("version too long", "POST", "/executions", {"agent": "battery", "version": "v" * 51}, 422, "version"),
    http("agent with a NUL", "POST", "/executions", {"agent": "x\u0000"}, 422, "agent"),
    http(
        "key without the scope",
        "POST",
        "/executions/{target}/events",
        {"type": "MESSAGE_RECEIVED", "event_id": "h7", "data": {"text": "x"}},
        403,
        "events:MESSAGE_RECEIVED",
        key="reader",
    ),
]


def test_the_battery_is_large_and_names_are_unique() -> None:
    assert len(CASES) >= 50
    assert len({case.name for case in CASES}) == len(CASES)
    assert {case.way for case in CASES} == {"definition", "event", "cli", "http"}


# -- the world the battery runs against -------------------------------------------------------


@dataclass
class Target:
    """A run waiting for a reply, a closed run, and everything needed to reach them."""

    dsmo: DsmoClient
    store: ArtifactStore
    settings: Settings
    run_id: str
    closed_run_id: str
    good_file: Path
    tmp: Path
    url: str
    keys: dict[str, str]

    async def history_length(self) -> int:
        history = await self.dsmo.temporal.get_workflow_handle(self.run_id).fetch_history()
        return len(history.events)

    async def runs_on_queue(self) -> int:
        query = f"TaskQueue = '{self.settings.temporal.task_queue}'"
        return (await self.dsmo.temporal.count_workflows(query)).count

    def fill(self, text: str) -> str:
        for name, value in (("{target}", self.run_id), ("{good}", str(self.good_file)), ("{tmp}", str(self.tmp))):
            text = text.replace(name, value)
        return text


@pytest_asyncio.fixture(scope="module")
async def target(
    dsmo: DsmoClient, store: ArtifactStore, stack_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Target]:
    tmp = tmp_path_factory.mktemp("battery")
    settings = stack_settings.with_changes(
        temporal={"task_queue": f"battery-{uuid.uuid4().hex[:8]}"}, ingress={"api_keys_file": str(tmp / "keys.json")}
    )
    definition = parse_definition(BASE)
    DefinitionStore(store).publish(definition)
    good_file = tmp / "good.json"
    good_file.write_text(json.dumps(BASE))
    key_store = KeyStore(settings.api_keys_path)
    keys = {
        "crm": key_store.add("crm", ["start", "read", "cancel", "events:*"]),
        "reader": key_store.add("reader", ["read"]),
    }
    worker = build_worker(
        dsmo.temporal, task_queue=settings.temporal.task_queue, store=store, channel=FileChannel(tmp / "out")
    )
    customer = {"customer": {"name": "Ana", "phone": "+34 600"}, "text": "Hola, sigo interesada."}
    async with worker:
        run_id = (await dsmo.start(definition, customer, task_queue=settings.temporal.task_queue)).run_id
        closed = parse_definition(
            {
                "agent": "battery-closed",
                "start": "only",
                "nodes": {"only": {"actionType": "send_message", "parameters": {"to": "x", "message": "done"}}},
            }
        )
        closed_run_id = (await dsmo.start(closed, {}, task_queue=settings.temporal.task_queue)).run_id
        await dsmo.result(closed_run_id)
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        target = Target(dsmo, store, settings, run_id, closed_run_id, good_file, tmp, url="", keys=keys)
        # Each case counts the queue's runs in visibility before and after: let it list these two
        # first, or a late record would read as a run the case started.
        await until_value(target.runs_on_queue, lambda count: count >= 2, "visibility lists the battery's runs")
        with serving(settings) as url:
            target.url = url
            yield target
        # Nothing in the battery broke the run: a good reply still resumes it to the end.
        await dsmo.respond(run_id, "sí", event_id="battery-good-reply")
        result = await dsmo.result(run_id)
        assert result.status is RunStatus.COMPLETED, result.error_message
        assert result.variables["lastResponse"] == "sí"


# -- one test, every case --------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_bad_input_is_refused_cleanly(case: Case, target: Target) -> None:
    history_before, runs_before = await target.history_length(), await target.runs_on_queue()
    message = await REFUSE[case.way](case, target)

    assert "\n" not in message.strip(), f"not one line: {message!r}"
    assert "Traceback" not in message
    for fragment in case.expect:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    # Nothing written: the target's history did not grow and no run started.
    assert await target.history_length() == history_before
    assert await target.runs_on_queue() == runs_before
    assert (await target.dsmo.status(target.run_id)).status is RunStatus.WAITING


async def refuse_definition(case: Case, target: Target) -> str:
    agent = f"battery-{uuid.uuid4().hex[:8]}"
    if isinstance(case.bad, str):
        text = case.bad
    else:
        path, value = case.bad
        data = mutate({**BASE, "agent": agent}, path, value)
        text = json.dumps(data)
    definition_file = target.tmp / f"{agent}.json"
    definition_file.write_text(text)
    code, out = await run_cli(target, ["definitions", "publish", str(definition_file)])
    assert code == 1, out
    # Nothing published under the would-be agent name.
    with pytest.raises(UnknownAgent):
        DefinitionStore(target.store).resolve(agent)
    assert not target.store.list_uris(index_key(agent))
    return out.removeprefix("error: ")


async def refuse_event(case: Case, target: Target) -> str:
    event_type, data = case.bad
    run_id = {"no-such-run": "battery-no-such-run", "closed": target.closed_run_id}.get(
        case.extra.get("run", ""), target.run_id
    )
    try:
        if case.extra.get("via") == "signal":
            await target.dsmo.signal_event(run_id, event_type, data)
        elif case.extra.get("raw") or "envelope" in case.extra:
            envelope = {"type": event_type, "event_id": "raw-1", "data": data, **case.extra.get("envelope", {})}
            await target.dsmo.temporal.get_workflow_handle(run_id).execute_update("deliver_event", envelope)
        else:
            await target.dsmo.deliver_event(run_id, event_type, data, event_id=case.extra.get("event_id", "b-1"))
    except Exception as err:  # noqa: BLE001 - the case passes on a refusal, whatever its class
        cause = getattr(err, "cause", None)
        return str(getattr(cause, "message", None) or err)
    raise AssertionError(f"{case.name}: accepted")


async def refuse_cli(case: Case, target: Target) -> str:
    code, out = await run_cli(target, [target.fill(arg) for arg in case.bad])
    assert code in (1, 2), out
    return out.removeprefix("error: ")


async def refuse_http(case: Case, target: Target) -> str:
    method, path, body = case.bad
    key = case.extra.get("key", "crm")
    headers = {"Authorization": f"Bearer {target.keys[key]}"} if key else {}
    kwargs: dict[str, Any] = {"content": body, "headers": {**headers, "Content-Type": "application/json"}}
    if not isinstance(body, bytes):
        kwargs = {"json": body, "headers": headers}
    async with httpx.AsyncClient(base_url=target.url, timeout=30) as client:
        response = await client.request(method, target.fill(path), **kwargs)
    error = response.json()["error"]
    return f"{response.status_code} {error['code']}: {error['message']}"


REFUSE = {"definition": refuse_definition, "event": refuse_event, "cli": refuse_cli, "http": refuse_http}


def mutate(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(data)
    *parents, last = path.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if value is DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


async def run_cli(target: Target, args: list[str]) -> tuple[int, str]:
    """`dsmo ARGS` as its entry point runs it (minus the final hard exit): exit code and stderr."""
    env = {**target.settings.to_env(), "DSMO_TASK_QUEUE": target.settings.temporal.task_queue}

    def call() -> tuple[int, str]:
        err = io.StringIO()
        with (
            mock.patch.dict(os.environ, env),
            contextlib.redirect_stderr(err),
            contextlib.redirect_stdout(io.StringIO()),
        ):
            try:
                dsmo_cli(args)
                code = 0
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
        return code, err.getvalue().strip()

    code, out = await asyncio.to_thread(call)
    assert "Traceback" not in out
    # click's usage errors come as "Usage: ... / Try ... / Error: ..."; the last line is the error.
    return code, out.splitlines()[-1] if out else ""
