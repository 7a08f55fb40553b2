"""Declarative `llm` stages against a local OpenAI-compatible server the test starts: answers held
to a schema, repaired, retried, routed to the fail-safe; every call recorded; replays call no model."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import pytest_asyncio

from bench.llm_server import ChatServer, Reply
from dsmo.activities.actions import ActionRegistry
from dsmo.activities.artifacts import ArtifactStore, stage_output_key
from dsmo.activities.llm_http import CLIENT_POOLS
from dsmo.activities.llm_stage import LlmEndpoint, LlmStage, _Exchange
from dsmo.activities.messaging import FileChannel
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.polling import until

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
SCHEMA = {
    "type": "object",
    "required": ["category", "confidence"],
    "properties": {
        "category": {"enum": ["billing", "outage", "other"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "reason": {"type": "string"},
    },
}
DEFINITION = {
    "agent": "llm-triage",
    "version": "1.0.0",
    "inputs": ["text", "customer"],
    "start": "classify",
    "failSafe": "review",
    "nodes": {
        "classify": {
            "actionType": "llm",
            "system": "You sort support tickets for {{customer.plan}} customers. Answer in JSON.",
            "prompt": "Ticket from {{customer.name}}: {{input.text}}",
            "model": "fast",
            "temperature": 0.2,
            "maxTokens": 200,
            "outputSchema": SCHEMA,
            "retries": 1,
            "retry": {"maxAttempts": 3, "initialInterval": "100ms", "jitter": 0},
            "transitions": [
                {"when": 'stages.classify.summary.category == "outage"', "to": "page"},
                {"to": "answer"},
            ],
        },
        "page": {"actionType": "send_message", "parameters": {"to": "on-call", "message": "outage"}},
        "answer": {"actionType": "send_message", "parameters": {"message": "{{stages.classify.summary.category}}"}},
        "review": {"actionType": "send_message", "parameters": {"to": "support", "message": "manual review"}},
    },
}
TICKET = {"text": "The site is down since 9:00", "customer": {"name": "Ada", "plan": "gold"}}
OUTAGE = json.dumps({"category": "outage", "confidence": 0.9, "reason": "site down"})
BILLING = json.dumps({"category": "billing", "confidence": 0.6, "reason": "an invoice"})


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    server = ChatServer(content=OUTAGE)
    server.start()
    yield server
    server.stop()


@pytest_asyncio.fixture
async def llm_harness(
    dsmo: DsmoClient, store: ArtifactStore, actions: ActionRegistry, tmp_path: Path, stack_settings: Settings, chat
) -> AsyncIterator[Harness]:
    task_queue = f"llm-{uuid.uuid4().hex[:10]}"
    endpoint = LlmEndpoint(chat.url, api_key="sk-test", default_model="local-default", aliases={"fast": "local-fast"})
    worker = build_worker(
        dsmo.temporal,
        task_queue=task_queue,
        store=store,
        channel=FileChannel(tmp_path / "outbox"),
        actions=actions,
        llm=endpoint,
    )
    async with worker:
        harness = Harness(dsmo, store, task_queue, tmp_path / "outbox", stack_settings)
        yield harness
    await harness.replay_all()


async def run(harness: Harness, definition: dict[str, Any] = DEFINITION) -> tuple[str, Any]:
    run_id = await harness.start(parse_definition(definition), TICKET)
    return run_id, await asyncio.wait_for(harness.dsmo.result(run_id), 60)


async def stage_event(harness: Harness, run_id: str, kind: str = "STAGE_SUCCEEDED") -> Any:
    return next(e for e in await harness.dsmo.events(run_id) if e.type == kind and e.stage == "classify")


def calls(store: ArtifactStore, uri: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The (request, response) artifacts of one attempt's calls, in order."""
    folder = uri.removeprefix(f"s3://{store.bucket}/")
    found = sorted(store.list_uris(folder))
    records = [store.read_json(u) for u in found]
    assert all(record["kind"] == "dsmo.llm-call/v1" for record in records)
    return [(record["request"], record["response"]) for record in records]


async def attempt_statuses(harness: Harness, run_id: str, attempt: int) -> list[int | None]:
    """The response status of each call one attempt of classify made, from its records."""
    version = next(e for e in await harness.dsmo.events(run_id)).workflow_version
    folder = stage_output_key(version, run_id, "classify", attempt).removesuffix("output.json") + "llm/"
    return [response["status"] for _, response in calls(harness.store, harness.store.uri(folder))]


def replay(harness: Harness, run_id: str, *flags: str) -> dict[str, Any]:
    env = {**harness.cli_env(), "DSMO_LLM_BASE_URL": ""}  # the CLI itself never needs the endpoint
    done = subprocess.run(
        [str(BIN / "dsmo"), "replay", run_id, "--json", *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    report: dict[str, Any] = json.loads(done.stdout)
    return report


async def test_a_valid_answer_is_the_stages_output_and_every_call_is_recorded(
    llm_harness: Harness, chat: ChatServer
) -> None:
    run_id, result = await run(llm_harness)
    assert result.status is RunStatus.COMPLETED and result.path == ["classify", "page"]
    (sent,) = chat.requests
    # The templates rendered from the run's variables and the stage's input document.
    assert sent["messages"] == [
        {"role": "system", "content": "You sort support tickets for gold customers. Answer in JSON."},
        {"role": "user", "content": "Ticket from Ada: The site is down since 9:00"},
    ]
    assert sent["model"] == "local-fast" and sent["temperature"] == 0.2 and sent["max_tokens"] == 200
    assert sent["response_format"] == {"type": "json_object"} and sent["authorization"] == "Bearer sk-test"
    # The answer is the output artifact; its short fields are the summary transitions read.
    event = await stage_event(llm_harness, run_id)
    assert event.agent_version == "1.0.0" and event.data["summary"] == json.loads(OUTAGE)
    assert llm_harness.store.read_json(event.artifact_uris[0])["output"] == json.loads(OUTAGE)
    # The audit trail: model, prompt hash, tokens, latency; never the prompt or the answer.
    llm = event.data["llm"]
    assert llm["model"] == "local-chat-1" and llm["requestedModel"] == "local-fast" and llm["calls"] == 1
    assert len(llm["promptSha256"]) == 64 and llm["usage"]["total_tokens"] > 0 and llm["latencyMs"] >= 0
    assert "Ada" not in json.dumps(event.data)
    ((request, response),) = calls(llm_harness.store, llm["artifacts"][0])
    assert request["messages"] == sent["messages"] and response["status"] == 200
    assert json.loads(response["body"])["choices"][0]["message"]["content"] == OUTAGE
    # The model call heartbeats: a worker that dies in it is seen in seconds, not at the timeout.
    history = await llm_harness.dsmo.temporal.get_workflow_handle(run_id).fetch_history()
    (scheduled,) = [
        event.activity_task_scheduled_event_attributes
        for event in history.events
        if event.HasField("activity_task_scheduled_event_attributes")
        and event.activity_task_scheduled_event_attributes.activity_type.name == "run_stage"
    ]
    assert scheduled.heartbeat_timeout.ToSeconds() == 10


async def test_an_invalid_answer_is_sent_back_and_the_repaired_one_is_used(
    llm_harness: Harness, chat: ChatServer
) -> None:
    chat.reply(Reply(content="Sure! It is an outage."), Reply(content=BILLING))
    run_id, result = await run(llm_harness)
    assert result.status is RunStatus.COMPLETED and result.path == ["classify", "answer"]
    first, second = chat.requests
    assert second["messages"][:2] == first["messages"]
    assert second["messages"][2] == {"role": "assistant", "content": "Sure! It is an outage."}
    assert "it is not JSON" in second["messages"][3]["content"]
    event = await stage_event(llm_harness, run_id)
    assert event.data["llm"]["calls"] == 2
    (_, rejected), (_, taken) = calls(llm_harness.store, event.data["llm"]["artifacts"][0])
    assert "It is an outage" in rejected["body"] and "an invoice" in taken["body"]


async def test_rate_limits_and_server_errors_are_retried(llm_harness: Harness, chat: ChatServer) -> None:
    chat.reply(Reply(status=429, body='{"error": "slow down"}'), Reply(status=503, body="unavailable"))
    run_id, result = await run(llm_harness)
    assert result.status is RunStatus.COMPLETED and result.path == ["classify", "page"]
    assert len(chat.requests) == 3
    failed = [e for e in await llm_harness.dsmo.events(run_id) if e.type == "STAGE_FAILED"]
    assert [(e.attempt, e.data["kind"]) for e in failed] == [(1, "transient"), (2, "transient")]
    assert "429" in failed[0].data["error"] and "503" in failed[1].data["error"]
    # A failed call is recorded too, in its own attempt's folder.
    assert [await attempt_statuses(llm_harness, run_id, attempt) for attempt in (1, 2, 3)] == [[429], [503], [200]]


async def test_answers_that_stay_invalid_take_the_fail_safe_route(llm_harness: Harness, chat: ChatServer) -> None:
    off_schema = json.dumps({"category": "sales", "confidence": 0.5})
    chat.reply(Reply(content=off_schema), Reply(content=off_schema))
    run_id, result = await run(llm_harness)
    assert result.status is RunStatus.COMPLETED and result.path == ["classify", "review"]
    assert len(chat.requests) == 2  # the first answer and one retry (retries: 1), never a stage retry
    violation = next(e for e in await llm_harness.dsmo.events(run_id) if e.type == "CONTRACT_VIOLATION")
    assert "2 answers did not match outputSchema" in violation.data["reason"]
    assert "category" in violation.data["reason"]
    assert await attempt_statuses(llm_harness, run_id, 1) == [200, 200]


async def test_a_refused_request_fails_the_stage_at_once(llm_harness: Harness, chat: ChatServer) -> None:
    chat.reply(Reply(status=400, body='{"error": "unknown model"}'))
    run_id, result = await run(llm_harness)
    assert result.status is RunStatus.FAILED and "refused the request (400)" in (result.error_message or "")
    assert len(chat.requests) == 1
    assert await attempt_statuses(llm_harness, run_id, 1) == [400]


async def test_a_replay_calls_no_model_and_rerun_llm_does(llm_harness: Harness, chat: ChatServer) -> None:
    chat.reply(Reply(status=503, body="unavailable"), Reply(content="not json"), Reply(content=OUTAGE))
    run_id, result = await run(llm_harness)
    assert result.path == ["classify", "page"] and len(chat.requests) == 3

    # The recorded responses answer: the same failure, the same repair, the same path, no request.
    report = await asyncio.to_thread(replay, llm_harness, run_id)
    assert report["samePath"] and len(chat.requests) == 3
    replayed = await stage_event(llm_harness, report["replay"])
    assert replayed.data["llm"]["recorded"] is True and replayed.data["llm"]["calls"] == 2
    assert report["outputs"]["classify"][0] == report["outputs"]["classify"][1]

    # --rerun-llm asks the model again; the report shows how the answer and the path changed.
    chat.content = BILLING
    rerun = await asyncio.to_thread(replay, llm_harness, run_id, "--rerun-llm")
    assert len(chat.requests) == 4
    assert not rerun["samePath"] and rerun["replay_path"] == ["classify", "answer"]
    assert 'category: "outage" -> "billing"' in rerun["answers"]["classify"]


async def test_one_worker_holds_200_model_calls_in_flight(
    dsmo: DsmoClient, store: ArtifactStore, tmp_path: Path, chat: ChatServer
) -> None:
    # The server answers no call before 200 are in flight at once: the runs complete only if the
    # worker holds them all (its default would hold 16).
    chat.hold_until = 200
    task_queue = f"llm-wide-{uuid.uuid4().hex[:8]}"
    one_stage = {
        "agent": "llm-wide",
        "start": "ask",
        "nodes": {"ask": {"actionType": "llm", "prompt": "Say {{input.n}}", "timeout": "180s"}},
    }
    worker = build_worker(
        dsmo.temporal,
        task_queue=task_queue,
        store=store,
        channel=FileChannel(tmp_path / "outbox"),
        max_concurrent_activities=256,
        llm=LlmEndpoint(chat.url),
    )
    async with worker:
        definition = parse_definition(one_stage)
        runs = await asyncio.gather(
            *(dsmo.start(definition, {"n": index}, task_queue=task_queue) for index in range(200))
        )
        run_ids = [run.run_id for run in runs]
        results = await asyncio.wait_for(asyncio.gather(*(dsmo.result(run_id) for run_id in run_ids)), 170)
    assert chat.peak_in_flight == 200 and len(chat.requests) == 200
    assert all(result.status is RunStatus.COMPLETED for result in results)


async def test_calls_are_spread_over_the_stage_s_http_clients(chat: ChatServer, store: ArtifactStore) -> None:
    # One connection pool with hundreds of connections costs the worker more per answer than the
    # answer itself; the stage keeps several small pools and takes them in turn.
    sent: dict[int, int] = {0: 0, 1: 0, 2: 0}

    def counting(index: int) -> httpx.AsyncClient:
        async def count(request: httpx.Request) -> None:
            sent[index] += 1

        return httpx.AsyncClient(event_hooks={"request": [count]})

    stage = LlmStage(LlmEndpoint(chat.url), store, clients=[counting(0), counting(1), counting(2)])
    exchanges = [_Exchange(number, {"model": "m", "messages": []}) for number in range(1, 7)]
    await asyncio.gather(*(stage._send(exchange, "run:stage:1") for exchange in exchanges))
    assert sent == {0: 2, 1: 2, 2: 2} and len(chat.requests) == 6
    assert all(exchange.status == 200 for exchange in exchanges)
    assert len(LlmStage(LlmEndpoint(chat.url), store).clients) == CLIENT_POOLS > 1


async def test_a_corpus_of_50_llm_runs_replayed_against_a_new_transition_calls_no_model(
    llm_harness: Harness, chat: ChatServer
) -> None:
    dsmo, agent = llm_harness.dsmo, f"llm-what-if-{uuid.uuid4().hex[:6]}"
    definition = {**DEFINITION, "agent": agent}
    outages = [await llm_harness.start(parse_definition(definition), TICKET) for _ in range(25)]
    for run_id in outages:
        await asyncio.wait_for(dsmo.result(run_id), 60)
    chat.content = BILLING
    billing = [await llm_harness.start(parse_definition(definition), TICKET) for _ in range(25)]
    for run_id in billing:
        assert (await asyncio.wait_for(dsmo.result(run_id), 60)).path == ["classify", "answer"]
    query = f"AgentName = '{agent}'"
    await until(lambda: _completed(dsmo, query, 50), "visibility lists the 50 runs as completed")
    calls = len(chat.requests)
    # Version 2 pages the on-call team for billing tickets too.
    nodes: dict[str, Any] = dict(cast(dict[str, Any], DEFINITION["nodes"]))
    nodes["classify"] = {
        **nodes["classify"],
        "transitions": [
            {"when": 'stages.classify.summary.category in ["outage", "billing"]', "to": "page"},
            {"to": "answer"},
        ],
    }
    candidate = parse_definition({**definition, "version": "2.0.0", "nodes": nodes})
    report = await dsmo.what_if(query, candidate, task_queue=llm_harness.task_queue)
    llm_harness.started.extend(run.replay_id for run in report.runs)
    summary = report.summary()
    assert (summary["runs"], summary["samePath"], summary["errors"]) == (50, 25, 0)
    assert summary["byDivergence"] == {"after classify: answer -> page": 25}
    assert {run.run_id for run in report.runs if not run.same_path} == set(billing)
    assert len(chat.requests) == calls  # every answer came from the record: no model was asked


async def test_what_if_with_a_changed_prompt_asks_no_model_and_says_why_without_rerun_llm(
    llm_harness: Harness, chat: ChatServer
) -> None:
    dsmo, agent = llm_harness.dsmo, f"llm-prompt-{uuid.uuid4().hex[:6]}"
    definition = {**DEFINITION, "agent": agent}
    run_id = await llm_harness.start(parse_definition(definition), TICKET)
    await asyncio.wait_for(dsmo.result(run_id), 60)
    query = f"AgentName = '{agent}'"
    await until(lambda: _completed(dsmo, query, 1), "visibility lists the run as completed")
    calls = len(chat.requests)
    nodes: dict[str, Any] = dict(cast(dict[str, Any], DEFINITION["nodes"]))
    nodes["classify"] = {**nodes["classify"], "prompt": "Classify this ticket from {{customer.name}}: {{input.text}}"}
    candidate = parse_definition({**definition, "version": "2.0.0", "nodes": nodes})
    report = await dsmo.what_if(query, candidate, task_queue=llm_harness.task_queue)
    llm_harness.started.extend(run.replay_id for run in report.runs)
    (replayed,) = report.runs
    assert replayed.candidate_status == "failed"
    assert "new or changed in the version replayed" in (replayed.problem or ""), replayed
    assert "--rerun-llm" in (replayed.problem or "")
    assert len(chat.requests) == calls  # the record does not answer a changed question, and no model is asked


async def _completed(dsmo: DsmoClient, query: str, count: int) -> bool:
    """Whether visibility (written asynchronously) lists ``count`` runs of ``query`` as completed."""
    return (await dsmo.temporal.count_workflows(f"{query} AND ExecutionStatus = 'Completed'")).count == count
