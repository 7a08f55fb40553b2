"""Hostile model answers (a backtracking pattern's worst case, an endless answer, deep nesting,
non-finite numbers) are contract violations of their own stage, every call recorded, while
another run on the same worker completes."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bench.llm_server import ChatServer, Reply
from dsmo.activities.artifacts import ArtifactStore, stage_output_key
from dsmo.activities.contract_schemas import ContractSchema
from dsmo.activities.llm_stage import LlmEndpoint
from dsmo.activities.messaging import FileChannel
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness
from tests.integration.llm.test_llm_stage import replay

pytestmark = pytest.mark.integration

CAP = 64 << 10
# Python's `re` takes ~2^n steps on n `a`s and a `!` against this pattern: 40 would be days.
BACKTRACKING = "^(a+)+$"
WORD_SCHEMA = {
    "type": "object",
    "required": ["word"],
    "properties": {"word": {"type": "string", "pattern": BACKTRACKING}},
}


def hostile(schema: dict[str, Any] | None) -> dict[str, Any]:
    ask: dict[str, Any] = {
        "actionType": "llm",
        "prompt": "Say {{input.text}}",
        "retries": 1,
        "transitions": [{"to": "done"}],
    }
    if schema is not None:
        ask["outputSchema"] = schema
    return {
        "agent": "llm-hostile",
        "start": "ask",
        "failSafe": "review",
        "nodes": {
            "ask": ask,
            "done": {"actionType": "send_message", "parameters": {"message": "done"}},
            "review": {"actionType": "send_message", "parameters": {"message": "review"}},
        },
    }


CONTROL = {
    "agent": "control",
    "start": "hello",
    "nodes": {"hello": {"actionType": "send_message", "parameters": {"message": "hi"}}},
}


@pytest_asyncio.fixture
async def harness(
    dsmo: DsmoClient, store: ArtifactStore, tmp_path: Path, stack_settings: Settings, chat: ChatServer
) -> AsyncIterator[Harness]:
    task_queue = f"llm-hostile-{uuid.uuid4().hex[:8]}"
    worker = build_worker(
        dsmo.temporal,
        task_queue=task_queue,
        store=store,
        channel=FileChannel(tmp_path / "outbox"),
        llm=LlmEndpoint(chat.url, max_response_bytes=CAP),
    )
    async with worker:
        harness = Harness(dsmo, store, task_queue, tmp_path / "outbox", stack_settings)
        yield harness
    await harness.replay_all()


async def hostile_beside_a_control(harness: Harness, chat: ChatServer, schema: dict[str, Any] | None) -> Any:
    """Start the hostile run; once its first answer has gone out, a control run must complete."""
    run_id = await harness.start(parse_definition(hostile(schema)), {"text": "a"})
    while not chat.requests:  # the hostile answer is on its way (hang guard: the suite's timeout)
        await asyncio.sleep(0.02)
    control = await harness.start(parse_definition(CONTROL))
    assert (await asyncio.wait_for(harness.dsmo.result(control), 60)).status is RunStatus.COMPLETED
    result = await asyncio.wait_for(harness.dsmo.result(run_id), 60)
    assert result.status is RunStatus.COMPLETED and result.path == ["ask", "review"]
    return run_id


async def records(harness: Harness, run_id: str) -> list[dict[str, Any]]:
    """The response of every call of the first attempt of `ask`, from the store."""
    version = next(e for e in await harness.dsmo.events(run_id)).workflow_version
    folder = stage_output_key(version, run_id, "ask", 1).removesuffix("output.json") + "llm/"
    return [harness.store.read_json(uri)["response"] for uri in sorted(harness.store.list_uris(folder))]


async def violation(harness: Harness, run_id: str) -> str:
    events = await harness.dsmo.events(run_id)
    assert not [e for e in events if e.type == "STAGE_FAILED" and e.data.get("kind") == "transient"]
    reason: str = next(e for e in events if e.type == "CONTRACT_VIOLATION").data["reason"]
    return reason


async def test_a_backtracking_pattern_is_matched_in_linear_time(harness: Harness, chat: ChatServer) -> None:
    chat.content = json.dumps({"word": "a" * 40 + "!"})
    run_id = await hostile_beside_a_control(harness, chat, WORD_SCHEMA)
    assert "does not match '^(a+)+$'" in await violation(harness, run_id)
    assert [record["status"] for record in await records(harness, run_id)] == [200, 200]


async def test_an_answer_above_the_cap_is_refused_unread_and_recorded(harness: Harness, chat: ChatServer) -> None:
    endless = 64 << 20
    chat.reply(Reply(streamed=endless))
    run_id = await hostile_beside_a_control(harness, chat, None)
    assert f"larger than the {CAP:,}-byte cap (DSMO_LLM_MAX_RESPONSE_BYTES)" in await violation(harness, run_id)
    # One call: no repair sends the answer back. Its record says why, and holds none of it.
    assert len(chat.requests) == 1
    (record,) = await records(harness, run_id)
    assert record["status"] == 200 and record["body"] == "" and "cap" in record["refused"]
    # The worker stopped reading: the server made only what the connection buffered.
    assert chat.streamed_bytes < endless // 4
    # A replay answers from the record: the same refusal, the same route, no model call.
    report = await asyncio.to_thread(replay, harness, run_id)
    assert report["samePath"] and len(chat.requests) == 1


async def test_an_answer_declared_above_the_cap_is_not_read(harness: Harness, chat: ChatServer) -> None:
    chat.reply(Reply(content="a" * (CAP + 1)))  # sent with its Content-Length
    run_id = await hostile_beside_a_control(harness, chat, None)
    assert f"above the {CAP:,}-byte cap (DSMO_LLM_MAX_RESPONSE_BYTES)" in await violation(harness, run_id)
    (record,) = await records(harness, run_id)
    assert record["body"] == "" and record["refused"].startswith("the response declares")
    assert len(chat.requests) == 1


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"word": "aa", "confidence": NaN}', "answer.confidence: nan is not a JSON number"),
        ('{"word": "aa", "confidence": -Infinity}', "answer.confidence: -inf is not a JSON number"),
        ('{"word": "aa", "confidence": 1e999}', "answer.confidence: inf is not a JSON number"),
        ('{"word": ' * 5_000 + '"aa"' + "}" * 5_000, "it is nested too deep"),
        ('{"word": "aa", "x": ' + "[" * 200 + "]" * 200 + "}", "nested more than 64 levels deep"),
    ],
    ids=["nan", "minus-infinity", "overflow", "nested-5000", "nested-200"],
)
async def test_non_finite_numbers_and_deep_nesting_are_contract_violations(
    harness: Harness, chat: ChatServer, content: str, reason: str
) -> None:
    chat.content = content
    run_id = await hostile_beside_a_control(harness, chat, WORD_SCHEMA)
    assert reason in await violation(harness, run_id)
    # Both calls (the answer and its repair) are recorded, so a replay has both to answer from.
    assert [record["status"] for record in await records(harness, run_id)] == [200, 200]


async def test_a_schema_published_before_re2_fails_its_run_at_once(harness: Harness, chat: ChatServer) -> None:
    # Admitted without today's checks, as a definition published before them was.
    lookahead = {"type": "object", "properties": {"word": {"type": "string", "pattern": "^(?!no)"}}}
    definition = AgentDefinition.model_validate(hostile(lookahead))
    run_id = await harness.start(definition, {"text": "a"})
    result = await asyncio.wait_for(harness.dsmo.result(run_id), 60)
    assert result.status is RunStatus.FAILED and "linear-time engine (RE2)" in (result.error_message or "")
    assert not chat.requests  # refused before any call


async def test_answers_are_checked_off_the_event_loop(
    harness: Harness, chat: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker runs on this test's event loop, on the main thread.
    on_the_loop: list[bool] = []
    check = ContractSchema.check

    def observed(self: ContractSchema, document: Any, *, agent: str, what: str) -> None:
        on_the_loop.append(threading.current_thread() is threading.main_thread())
        check(self, document, agent=agent, what=what)

    monkeypatch.setattr(ContractSchema, "check", observed)
    chat.content = json.dumps({"word": "aaa"})
    run_id = await harness.start(parse_definition(hostile(WORD_SCHEMA)), {"text": "a"})
    result = await asyncio.wait_for(harness.dsmo.result(run_id), 60)
    assert result.path == ["ask", "done"] and on_the_loop == [False]
