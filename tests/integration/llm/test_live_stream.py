"""A run's live stream: an `llm` stage with `stream: true` shows its tokens as the model writes
them, over the ingress's server-sent events and `DsmoClient.stream`; a reader that drops and
comes back with its last id gets the rest, nothing twice; the recorded answer is the tokens."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.llm_server import ChatServer, Reply
from dsmo import progress
from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.llm_stage import LlmEndpoint
from dsmo.activities.messaging import FileChannel
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.run_stream import BadCursor, StreamItem
from dsmo.config.settings import Settings
from dsmo.server.api_keys import KeyStore
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.ingress_server import serving
from tests.worker_processes import kill_worker, start_worker_process

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
WORDS = [f"w{n}" for n in range(200)]


def writer(agent: str) -> dict[str, Any]:
    """A one-stage agent whose model writes a plain-text answer, streamed."""
    return {
        "agent": agent,
        "start": "write",
        "nodes": {
            "write": {
                "actionType": "llm",
                "prompt": "Write 200 words",
                "stream": True,
                "transitions": [{"to": "done"}],
            },
            "done": {"actionType": "send_message", "parameters": {"message": "written"}},
        },
    }


@pytest.fixture
def ingress(tool_harness: Harness, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """The ingress on its own port: its URL, a key that reads, and one that does not."""
    settings = tool_harness.settings.with_changes(
        temporal={"task_queue": tool_harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    keys = KeyStore(settings.api_keys_path)
    reader, starter = keys.add("watcher", ["read"]), keys.add("starter", ["start"])
    with serving(settings) as url:
        yield url, reader, starter


async def sse(
    url: str, key: str, *, last_id: str | None = None, stop_after_tokens: int | None = None
) -> list[dict[str, Any]]:
    """Read server-sent events until `end` (or ``stop_after_tokens`` tokens, then hang up)."""
    headers = {"Authorization": f"Bearer {key}"} | ({"Last-Event-ID": last_id} if last_id else {})
    got: list[dict[str, Any]] = []
    tokens = 0
    async with httpx.AsyncClient(timeout=60) as client, client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            if "event" not in fields:
                fields = {}
                continue
            got.append({"id": fields.get("id"), "event": fields["event"], "data": json.loads(fields["data"])})
            fields = {}
            tokens += got[-1]["event"] == "token"
            if got[-1]["event"] == "end" or (stop_after_tokens is not None and tokens >= stop_after_tokens):
                break
    return got


async def docs_example(client: DsmoClient, run_id: str, last_id: str) -> str:
    """Run docs/live.md's Python example on ``run_id`` from ``last_id``; what it printed."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "live.md").read_text()
    code = page.split("## From Python\n", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    code = code.replace('"support-7"', "run_id")
    body = "".join(f"    {line}\n" for line in code.splitlines())
    namespace: dict[str, Any] = {}
    exec(f"async def example(client, run_id, last_id):\n{body}", namespace)  # the docs' example, run as written
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        await namespace["example"](client, run_id, last_id)
    return out.getvalue()


async def test_tokens_arrive_before_the_stage_ends_and_a_reader_resumes_after_its_last_id(
    tool_harness: Harness, chat: ChatServer, ingress: tuple[str, str, str]
) -> None:
    url, reader, starter = ingress
    chat.reply(Reply(content=" ".join(WORDS), token_delay=0.01))  # 200 tokens over ~2 s
    run_id = await tool_harness.start(parse_definition(writer(f"writer-{uuid.uuid4().hex[:6]}")))
    stream_url = f"{url}/executions/{run_id}/stream"

    first = await sse(stream_url, reader, stop_after_tokens=50)
    # The first token came while the stage was still running: before the stage's success.
    kinds = [item["event"] for item in first]
    assert "token" in kinds and not any(
        item["event"] == "event" and item["data"]["type"] == "STAGE_SUCCEEDED" for item in first
    ), kinds
    assert next(item for item in first if item["event"] == "attempt")["data"] == {
        "stage": "write",
        "attempt": 1,
        "retry": False,
    }
    rest = await sse(stream_url, reader, last_id=first[-1]["id"])

    both = first + rest
    tokens = [item["data"]["text"] for item in both if item["event"] == "token"]
    assert "".join(tokens) == " ".join(WORDS)  # all 200, in order, nothing twice
    seqs = [item["data"]["seq"] for item in both if item["event"] == "event"]
    assert seqs == list(range(1, len(seqs) + 1))  # every trail event once, in order
    assert both[-1]["event"] == "end" and "RUN_COMPLETED" in [i["data"]["type"] for i in both if i["event"] == "event"]
    assert not [item for item in both if item["event"] == "abandoned"]

    # The record is the truth: the recorded answer is the tokens, put back together.
    await asyncio.wait_for(tool_harness.dsmo.result(run_id), 60)
    succeeded = next(i["data"] for i in both if i["event"] == "event" and i["data"]["type"] == "STAGE_SUCCEEDED")
    output = tool_harness.store.read_json(succeeded["artifactUris"][0])["output"]
    assert output == {"text": " ".join(WORDS)}, output
    assert chat.requests[0]["stream"] is True

    # The same stream from Python, resumed from the same place: the docs' example, run as written.
    printed = await docs_example(tool_harness.dsmo, run_id, first[-1]["id"])
    assert " ".join(WORDS[50:]) in printed and " ".join(WORDS[49:]) not in printed, printed
    assert printed.rstrip().endswith("RUN_COMPLETED")
    with pytest.raises(BadCursor):
        await anext(aiter(tool_harness.dsmo.stream(run_id, after="7;nonsense")))

    # Reading is the scope `read`; a position the stream never gave is named.
    async with httpx.AsyncClient(timeout=30) as client:
        refused = await client.get(stream_url, headers={"Authorization": f"Bearer {starter}"})
        bad = await client.get(stream_url, params={"after": "x"}, headers={"Authorization": f"Bearer {reader}"})
        missing = await client.get(
            f"{url}/executions/no-such-run/stream", headers={"Authorization": f"Bearer {reader}"}
        )
    assert refused.status_code == 403 and bad.status_code == 422 and missing.status_code == 404
    assert "is not a stream position" in bad.text


async def test_a_reader_resumes_after_any_item_with_exactly_the_rest_and_a_forged_position_is_refused(
    tool_harness: Harness, chat: ChatServer, ingress: tuple[str, str, str]
) -> None:
    url, reader, _ = ingress
    chat.reply(Reply(content=" ".join(WORDS[:20])), Reply(content=" ".join(WORDS[:5])))
    agent = f"writer-{uuid.uuid4().hex[:6]}"
    run_id, other = [await tool_harness.start(parse_definition(writer(agent))) for _ in range(2)]
    for each in (run_id, other):
        await asyncio.wait_for(tool_harness.dsmo.result(each), 60)
    stream_url = f"{url}/executions/{run_id}/stream"
    whole = await sse(stream_url, reader)
    assert [item["event"] for item in whole].count("attempt") == 1 and whole[-1]["event"] == "end"
    # After every item, the attempt's announcement too: the rest, nothing twice, nothing abandoned.
    for index, item in enumerate(whole[:-1]):
        rest = await sse(stream_url, reader, last_id=item["id"])
        assert rest == whole[index + 1 :], (item, [i["event"] for i in rest])

    attempt_id = next(item["id"] for item in whole if item["event"] == "attempt")
    seq, stage_part = attempt_id.split(";", 1)
    elsewhere = next(i["id"] for i in await sse(f"{url}/executions/{other}/stream", reader) if i["event"] == "attempt")
    forged = {
        "past the end": f"{len(whole) + 100}",
        "another run's attempt": elsewhere,
        "an attempt never begun": f"{seq};{stage_part.replace('@1=', '@9=')}",
        "another version": f"{seq};{stage_part.rsplit('@', 1)[0]}@ffff",
        "a digit that is not ASCII": "\u00b2",
        "an Arabic-Indic digit": "\u0663",
    }
    async with httpx.AsyncClient(timeout=30) as client:
        for what, position in forged.items():
            answer = await client.get(
                stream_url, params={"after": position}, headers={"Authorization": f"Bearer {reader}"}
            )
            assert answer.status_code == 422 and "invalid_position" in answer.text, (what, answer.text)


async def test_a_worker_killed_mid_stream_leaves_an_abandoned_attempt_and_the_retry_streams_the_answer(
    dsmo: DsmoClient, store: ArtifactStore, stack_settings: Settings, chat: ChatServer, tmp_path: Path
) -> None:
    queue = f"stream-kill-{uuid.uuid4().hex[:8]}"
    settings = stack_settings.with_changes(temporal={"task_queue": queue}, worker={"metrics_bind": ""})
    log = tmp_path / "worker.log"
    chat.reply(
        Reply(content=" ".join(f"lost{n}" for n in range(200)), token_delay=0.05),  # 10 s: the worker dies in it
        Reply(content=" ".join(WORDS)),
    )
    first = await start_worker_process(settings, log, {"DSMO_LLM_BASE_URL": chat.url})
    items: list[StreamItem] = []
    try:
        run_id = (await dsmo.start(parse_definition(writer(f"writer-{uuid.uuid4().hex[:6]}")), task_queue=queue)).run_id
        stream = dsmo.stream(run_id)
        async for item in stream:
            items.append(item)
            if sum(i.kind == "token" for i in items) == 20:
                break
    finally:
        kill_worker(first)
    worker = build_worker(
        dsmo.temporal, task_queue=queue, store=store, channel=FileChannel(tmp_path / "out"), llm=LlmEndpoint(chat.url)
    )
    async with worker:
        items += [item async for item in asyncio_timeout(dsmo.stream(run_id, after=items[-1].id), 90)]
        result = await asyncio.wait_for(dsmo.result(run_id), 60)
        await Harness(dsmo, store, queue, tmp_path / "out", stack_settings, started=[run_id]).replay_all()
    assert result.status is RunStatus.COMPLETED

    # The lost attempt's tokens, then its end marked `abandoned`, then the retry from its start.
    kinds = [(i.kind, i.data.get("attempt")) for i in items if i.kind in ("attempt", "abandoned")]
    assert kinds == [("attempt", 1), ("abandoned", 1), ("attempt", 2)], kinds
    retried = next(i for i in items if i.kind == "attempt" and i.data["attempt"] == 2)
    assert retried.data["retry"] is True
    lost = [i.data["text"] for i in items if i.kind == "token" and i.data["attempt"] == 1]
    kept = [i.data["text"] for i in items if i.kind == "token" and i.data["attempt"] == 2]
    assert len(lost) >= 20 and all(text.startswith("lost") for text in lost)
    assert "".join(kept) == " ".join(WORDS)
    # Nothing of the abandoned attempt is the answer: the committed output is the retry's.
    succeeded = next(e for e in await dsmo.events(run_id) if e.type == "STAGE_SUCCEEDED")
    assert succeeded.attempt == 2
    assert store.read_json(succeeded.artifact_uris[0])["output"] == {"text": " ".join(WORDS)}


async def asyncio_timeout(items: AsyncIterator[StreamItem], seconds: float) -> AsyncIterator[StreamItem]:
    """The items, failing the test if they have not ended within ``seconds`` (a hang guard)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        try:
            item = await asyncio.wait_for(anext(items), max(deadline - asyncio.get_running_loop().time(), 0.1))
        except StopAsyncIteration:
            return
        yield item


async def test_dsmo_runs_watch_prints_the_tokens_as_they_come_and_each_event(
    tool_harness: Harness, chat: ChatServer
) -> None:
    chat.reply(Reply(content=" ".join(WORDS), token_delay=0.005))
    run_id = await tool_harness.start(parse_definition(writer(f"writer-{uuid.uuid4().hex[:6]}")))
    command = [str(BIN / "dsmo"), "runs", "watch", run_id]
    env = tool_harness.cli_env()
    watched = await asyncio.to_thread(
        subprocess.run, command, check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert watched.returncode == 0, watched.stderr
    assert " ".join(WORDS) in watched.stdout  # the answer as it was written, token after token
    lines = watched.stdout.splitlines()
    assert any("STAGE_SUCCEEDED" in line for line in lines) and any("RUN_COMPLETED" in line for line in lines)
    assert lines.index(next(line for line in lines if "STAGE_ENQUEUED" in line)) < lines.index(" ".join(WORDS))


REPORTING = ProcessorRegistry()


@REPORTING.register("pages-plain", "1.0.0")
def _pages_plain(document: Any, message: StageMessage) -> ProcessorOutput:
    for page in (1, 2, 3):
        progress(step="reading", page=page)
        time.sleep(0.12)  # the reports go out while the agent works: more than one chunk
    return ProcessorOutput(document={"pages": 3}, summary={"pages": 3})


@REPORTING.register("pages-async", "1.0.0")
async def _pages_async(document: Any, message: StageMessage) -> ProcessorOutput:
    for page in (1, 2):
        progress(step="checking", page=page)
        await asyncio.sleep(0.12)
    return ProcessorOutput(document={"checked": 2}, summary={"checked": 2})


async def test_a_plugin_agents_progress_reaches_the_stream_before_its_stage_commits(
    dsmo: DsmoClient, store: ArtifactStore, tmp_path: Path
) -> None:
    queue = f"progress-{uuid.uuid4().hex[:8]}"
    worker = build_worker(
        dsmo.temporal, task_queue=queue, store=store, channel=FileChannel(tmp_path / "out"), registry=REPORTING
    )
    definition = parse_definition(
        {
            "agent": f"pages-{uuid.uuid4().hex[:6]}",
            "start": "read",
            "nodes": {
                "read": {"actionType": "run_agent", "agent": "pages-plain", "next": "check"},
                "check": {"actionType": "run_agent", "agent": "pages-async"},
            },
        }
    )
    async with worker:
        run_id = (await dsmo.start(definition, {}, task_queue=queue)).run_id
        items = [item async for item in asyncio_timeout(dsmo.stream(run_id), 60)]
        await Harness(dsmo, store, queue, tmp_path / "out", dsmo.core.settings, started=[run_id]).replay_all()
    shown = [
        (i.kind, i.data.get("type") or i.data.get("step"), i.data.get("page"))
        for i in items
        if i.kind == "progress" or (i.kind == "event" and i.data["type"] == "STAGE_SUCCEEDED")
    ]
    assert shown == [
        ("progress", "reading", 1),
        ("progress", "reading", 2),
        ("progress", "reading", 3),
        ("event", "STAGE_SUCCEEDED", None),
        ("progress", "checking", 1),
        ("progress", "checking", 2),
        ("event", "STAGE_SUCCEEDED", None),
    ], shown
    # Not audited, not part of the output: the record is what the agent returned.
    assert not [e for e in await dsmo.events(run_id) if "reading" in json.dumps(e.data)]
