"""Webhooks out, on a real stack: a receiver down for its first three POSTs gets the event once it is
up, signed (checked with the documented recipe), with the same delivery id on every attempt, across
a worker restart; a delivery past its budget is listed and redelivered by command; a replay sends
nothing; a subscription nobody could use is refused the same by the API and the CLI."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.messaging import FileChannel
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.hooks_client import dispatcher_id
from dsmo.config.settings import Settings
from dsmo.server.api_keys import KeyStore
from dsmo.worker import build_worker
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.ingress_server import serving
from tests.polling import until

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent


@dataclass
class Receiver:
    """A webhook receiver: answers 503 to a path's first ``down[path]`` POSTs, then 200."""

    down: dict[str, int] = field(default_factory=dict)
    received: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def posts(self, path: str) -> list[dict[str, Any]]:
        return [post for post in self.received if post["path"] == path]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.received.append({"path": self.path, "headers": dict(self.headers), "body": body})
            failing = state.down.get(self.path, 0)
            state.down[self.path] = max(failing - 1, 0)
            self.send_response(503 if failing else 200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()


@pytest_asyncio.fixture
async def hooked(
    dsmo: DsmoClient, store: ArtifactStore, stack_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[DsmoClient, str]]:
    """A client whose subscriptions are dispatched on a task queue of their own; cleaned up after.

    The receiver is on this host: the test's workers may POST to loopback (refused by default)."""
    monkeypatch.setenv("DSMO_HOOKS_ALLOW_PRIVATE", "on")
    queue = f"hooks-{uuid.uuid4().hex[:8]}"
    client = DsmoClient(dsmo.temporal, stack_settings.with_changes(temporal={"task_queue": queue}))
    yield client, queue
    for made in await client.hooks():
        await client.hooks.remove(made.id)
    with contextlib.suppress(Exception):  # it may have ended by itself
        await dsmo.temporal.get_workflow_handle(dispatcher_id(queue)).terminate("test over")


def worker_on(dsmo: DsmoClient, store: ArtifactStore, queue: str, outbox: Path) -> Any:
    return build_worker(dsmo.temporal, task_queue=queue, store=store, channel=FileChannel(outbox))


def greeter(agent: str) -> Any:
    return parse_definition(
        {
            "agent": agent,
            "start": "hi",
            "nodes": {"hi": {"actionType": "send_message", "parameters": {"message": "hi"}}},
        }
    )


def docs_verify() -> Any:
    """The receiver's check exactly as docs/live.md writes it (its `verify.py`)."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "live.md").read_text()
    code = page.split('```python title="verify.py"\n', 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "verify.py", "exec"), namespace)  # the docs' own recipe, run as written
    return namespace["verify"]


def verified(secret: str, post: dict[str, Any]) -> bool:
    return bool(docs_verify()(secret, post["headers"]["DSMO-Signature"], post["body"]))


async def test_a_receiver_down_for_three_posts_gets_the_event_once_up_across_a_worker_restart(
    hooked: tuple[DsmoClient, str], store: ArtifactStore, receiver: Receiver, tmp_path: Path
) -> None:
    client, queue = hooked
    agent = f"greeter-{uuid.uuid4().hex[:6]}"
    receiver.down["/done"] = 3
    made = await client.hooks.add(f"{receiver.url}/done", ["RUN_COMPLETED"], agent=agent, first_retry_seconds=0.5)
    async with worker_on(client, store, queue, tmp_path / "out"):
        run_id = (await client.start(greeter(agent), {}, task_queue=queue)).run_id
        await until(lambda: len(receiver.posts("/done")) >= 1, "no first POST")
    # The worker is gone between the first failed POST and the next: a new one takes over.
    async with worker_on(client, store, queue, tmp_path / "out"):
        await until(lambda: len(receiver.posts("/done")) >= 4, f"not delivered: {receiver.received}")
        # A replay acts on nothing: the run after it is delivered, the replay never is.
        replayed = (await client.replay(run_id, task_queue=queue)).replay
        later = (await client.start(greeter(agent), {}, task_queue=queue)).run_id
        await until(lambda: any(later.encode() in post["body"] for post in receiver.posts("/done")), "later run")
    assert not [post for post in receiver.received if replayed.encode() in post["body"]]
    posts = [post for post in receiver.posts("/done") if later.encode() not in post["body"]]
    assert len(posts) == 4, [post["headers"].get("DSMO-Attempt") for post in posts]
    assert len({post["headers"]["DSMO-Delivery"] for post in posts}) == 1  # one delivery id throughout
    attempts = [int(post["headers"]["DSMO-Attempt"]) for post in posts]
    assert attempts == sorted(set(attempts)) and attempts[0] == 1, attempts  # retries of one delivery
    assert all(verified(made.secret, post) for post in posts)
    assert not verified("whsec_wrong", posts[-1])
    delivered = json.loads(posts[-1]["body"])
    assert (delivered["event"], delivered["runId"], delivered["agent"], delivered["status"]) == (
        "RUN_COMPLETED",
        run_id,
        agent,
        "completed",
    )
    assert delivered["deliveryId"] == posts[-1]["headers"]["DSMO-Delivery"]


async def test_a_delivery_past_its_budget_is_listed_and_redelivered_by_command(
    hooked: tuple[DsmoClient, str], store: ArtifactStore, receiver: Receiver, tmp_path: Path, dsmo: DsmoClient
) -> None:
    client, queue = hooked
    agent = f"greeter-{uuid.uuid4().hex[:6]}"
    receiver.down["/flaky"] = 99
    await client.hooks.add(
        f"{receiver.url}/flaky", ["RUN_CREATED"], agent=agent, max_attempts=2, first_retry_seconds=0.2
    )
    env = Harness(client, store, queue, tmp_path / "out", client.core.settings).cli_env()

    def hooks_cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(BIN / "dsmo"), "hooks", *args]
        return subprocess.run(command, check=False, capture_output=True, text=True, env=env, timeout=60)

    async with worker_on(client, store, queue, tmp_path / "out"):
        run_id = (await client.start(greeter(agent), {}, task_queue=queue)).run_id
        failed: list[dict[str, Any]] = []

        async def listed() -> None:
            nonlocal failed
            failed = json.loads((await asyncio.to_thread(hooks_cli, "failed", "--json")).stdout)

        async def listed_any() -> bool:
            await listed()
            return bool(failed)

        await until(listed_any, "the failed delivery listed")
        assert [(f["event"], f["runId"]) for f in failed] == [("RUN_CREATED", run_id)], failed
        assert "answered 503" in failed[0]["reason"] and len(receiver.posts("/flaky")) == 2

        receiver.down["/flaky"] = 0  # the receiver is back
        again = await asyncio.to_thread(hooks_cli, "redeliver", failed[0]["deliveryId"])
        assert again.returncode == 0, again.stderr
        await until(lambda: len(receiver.posts("/flaky")) == 3, "not redelivered")
        await listed()
    assert failed == []
    ids = {post["headers"]["DSMO-Delivery"] for post in receiver.posts("/flaky")}
    assert ids == {failed_id for failed_id in [receiver.posts("/flaky")[0]["headers"]["DSMO-Delivery"]]}
    missing = await asyncio.to_thread(hooks_cli, "redeliver", "hook-nope.0")
    assert missing.returncode != 0 and "no failed delivery 'hook-nope.0'" in missing.stderr
    bad = await asyncio.to_thread(hooks_cli, "add", "ftp://x", "--events", "RUN_COMPLETED")
    assert bad.returncode != 0 and "url: 'ftp://x' is not an http(s) URL" in bad.stderr


UNUSABLE = [
    ({"url": "http://[::1"}, "url: 'http://[::1' is not a valid URL"),
    ({"url": "http://example.com:99999/x"}, "url: 'http://example.com:99999/x' is not a valid URL"),
    ({"url": "http:// /x"}, "url: 'http:// /x' has no valid host"),
    ({"url": "http://user:pa55word@example.com/x"}, "url: 'http://[redacted]@example.com/x' carries a user name"),
    ({"url": "https://example.com/x", "agent": "Bad Agent!"}, "agent: 'Bad Agent!' is not an agent name"),
]


async def test_a_subscription_nobody_could_use_is_refused_by_the_api_and_the_cli(
    harness: Harness, tmp_path: Path
) -> None:
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    key = KeyStore(settings.api_keys_path).add("ops", ["operate"])
    with serving(settings) as url:
        api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        for fields, why in UNUSABLE:
            answer = await asyncio.to_thread(api.post, "/hooks", json={"events": ["RUN_COMPLETED"], **fields})
            assert answer.status_code == 422, (fields, answer.status_code, answer.text)
            assert answer.json()["error"]["message"].startswith(why), answer.text
            assert "pa55word" not in answer.text
        listed = await asyncio.to_thread(api.get, "/hooks")
        assert listed.status_code == 200 and "pa55word" not in listed.text
    env = harness.cli_env()
    for fields, why in UNUSABLE:
        agent = ["--agent", fields["agent"]] if "agent" in fields else []
        command = [str(BIN / "dsmo"), "hooks", "add", fields["url"], "--events", "RUN_COMPLETED", *agent]
        added = await asyncio.to_thread(
            subprocess.run, command, check=False, capture_output=True, text=True, env=env, timeout=60
        )
        assert added.returncode != 0 and why in added.stderr, (fields, added.stderr)
        assert "pa55word" not in added.stderr
