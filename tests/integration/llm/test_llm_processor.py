"""The LLM processor against a small fake OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dsmo.activities.processors import ProcessorRegistry, default_registry
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from dsmo_examples.agents.llm import PROMPT_VERSION, LlmProcessor
from tests.conftest import Harness

pytestmark = pytest.mark.integration


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answers: list[tuple[int, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                status, content = fake.answers.pop(0) if fake.answers else (200, "{}")
                reply = {
                    "id": "chatcmpl-1",
                    "model": "fake-model-2026",
                    "system_fingerprint": "fp_test",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 12, "completion_tokens": 9},
                }
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(json.dumps(reply).encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture
def fake_llm() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    yield fake
    fake.server.shutdown()


@pytest.fixture
def registry(fake_llm: FakeOpenAI) -> ProcessorRegistry:
    merged = ProcessorRegistry()
    for name in default_registry.names():
        if name != "llm-summarize":  # replaced by one on the fake endpoint
            processor = default_registry.get(name)
            merged.register(processor.name, processor.version)(processor.fn)
    merged.register("llm-summarize", "1.0.0")(LlmProcessor(fake_llm.url, "fake-model", api_key="sk-test"))
    return merged


DEFINITION = {
    "agent": "llm-pipeline",
    "start": "summarize",
    "auditLevel": "extended",
    "failSafe": "review",
    "nodes": {
        "summarize": {
            "actionType": "run_agent",
            "agent": "llm-summarize",
            "retry": {"maxAttempts": 3, "initialInterval": "1s"},
            "transitions": [
                {"when": 'stages.summarize.summary.sentiment == "negative"', "to": "escalate"},
                {"to": "done"},
            ],
        },
        "escalate": {"actionType": "send_message", "parameters": {"message": "escalated"}},
        "done": {"actionType": "send_message", "parameters": {"message": "done"}},
        "review": {"actionType": "send_message", "parameters": {"message": "manual review"}},
    },
}
GOOD = json.dumps({"summary": "A customer is unhappy.", "sentiment": "negative", "entities": ["ACME"]})


async def test_llm_answer_validated_routed_and_metadata_audited(harness: Harness, fake_llm: FakeOpenAI) -> None:
    fake_llm.answers = [(503, ""), (200, GOOD)]  # a 503 is transient: retried
    run_id = await harness.start(parse_definition(DEFINITION), {"text": "The lamp arrived broken."})
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert (await harness.dsmo.status(run_id)).path == ["summarize", "escalate"]
    sent = fake_llm.requests[-1]
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer sk-test"
    assert sent["response_format"] == {"type": "json_object"} and sent["temperature"] == 0.0 and sent["seed"] == 7
    assert sent["messages"][1]["content"] == "The lamp arrived broken."
    succeeded = next(e for e in await harness.dsmo.events(run_id) if e.type == "STAGE_SUCCEEDED")
    inference = succeeded.data["inference"]
    assert inference["model"] == "fake-model-2026" and inference["promptVersion"] == PROMPT_VERSION
    assert (inference["temperature"], inference["top_p"], inference["seed"]) == (0.0, 1.0, 7)
    assert "The lamp" not in json.dumps(succeeded.data)  # metadata only, never the payload
    output = harness.store.read_json(result.variables["stages"]["summarize"]["outputUri"])
    assert output["output"]["entities"] == ["ACME"]


async def test_llm_answer_off_schema_is_a_contract_violation(harness: Harness, fake_llm: FakeOpenAI) -> None:
    fake_llm.answers = [(200, json.dumps({"summary": "ok", "sentiment": "ecstatic"}))]
    run_id = await harness.start(parse_definition(DEFINITION), {"text": "Great service!"})
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert (await harness.dsmo.status(run_id)).path == ["summarize", "review"]
    events = await harness.dsmo.events(run_id)
    failed = next(e for e in events if e.type == "STAGE_FAILED")
    assert failed.data["kind"] == "contract" and "does not match LlmAnswer" in failed.data["error"]
    assert [e.attempt for e in events if e.type == "STAGE_ENQUEUED"] == [1]  # never retried
    assert any(e.type == "CONTRACT_VIOLATION" for e in events)
