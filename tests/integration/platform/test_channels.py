"""The webhook channel POSTs messages and requests as JSON, once per idempotency key."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dsmo.activities.messaging import Channel, FileChannel, WebhookChannel
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness

pytestmark = pytest.mark.integration


class Receiver:
    def __init__(self) -> None:
        self.posts: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.fail_next = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if receiver.fail_next:
                    receiver.fail_next -= 1
                    self.send_response(503)
                else:
                    receiver.posts.append((dict(self.headers), body))
                    self.send_response(202)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/dsmo"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    thread = threading.Thread(target=found.server.serve_forever, daemon=True)
    thread.start()
    yield found
    found.server.shutdown()


async def test_webhook_channel_posts_json(harness: Harness, receiver: Receiver) -> None:
    definition = parse_definition(
        {
            "agent": "hooked",
            "start": "hi",
            "nodes": {
                "hi": {
                    "actionType": "send_message",
                    "parameters": {"message": "Hola {{name}}", "to": "+1", "channel": "webhook"},
                    "next": "docs",
                },
                "docs": {"actionType": "request_document", "parameters": {"documents": ["id"], "channel": "webhook"}},
            },
        }
    )
    receiver.fail_next = 1  # a 503 is retried by the activity
    channels: dict[str, Channel] = {"file": FileChannel(harness.outbox), "webhook": WebhookChannel(receiver.url)}
    queue = harness.task_queue + "-hook"
    async with build_worker(harness.dsmo.temporal, task_queue=queue, store=harness.store, channels=channels):
        run_id = (await harness.dsmo.start(definition, {"name": "Ana"}, task_queue=queue)).run_id
        await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        await harness.dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", {"document": "id", "url": "s3://d/id"})
        result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.variables["documentUrls"] == ["s3://d/id"]
    assert [body["kind"] for _, body in receiver.posts] == ["message", "document"]
    headers, message = receiver.posts[0]
    assert message["message"] == "Hola Ana" and message["to"] == "+1" and message["runId"] == run_id
    assert headers["Content-Type"] == "application/json" and headers["Idempotency-Key"] == message["idempotencyKey"]
    assert receiver.posts[1][1]["details"] == {"documents": ["id"]}
    assert harness.messages(run_id) == []  # nothing went to the file channel


async def test_unknown_channel_fails_the_run_clearly(harness: Harness) -> None:
    definition = parse_definition(
        {
            "agent": "hooked",
            "start": "hi",
            "nodes": {"hi": {"actionType": "send_message", "parameters": {"message": "x", "channel": "pigeon"}}},
        }
    )
    run_id = await harness.start(definition)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.FAILED
    assert "channel 'pigeon' is not configured on this worker" in (result.error_message or "")
