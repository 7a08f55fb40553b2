"""A local server speaking the OpenAI chat-completions API, for the suite and `make bench`.

It answers `POST /v1/chat/completions` from a script of replies (status, content or a raw body,
latency), then with a default reply, and keeps every request it received, so a test can count
the calls a run made. Asynchronous (uvicorn), so hundreds of slow calls can be in flight at once.

    python -m bench.llm_server --port 8099 --latency 1.0   # serve until stopped
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass(frozen=True)
class Reply:
    """One scripted reply: a chat completion with ``content`` (or ``tool_calls``), or ``body``
    sent as it is, or a chat completion whose content is ``streamed`` bytes of ``a``, made as it
    is sent (a hostile answer of any size at no cost to the server), without a Content-Length."""

    status: int = 200
    content: str | None = None
    body: str | None = None
    latency: float | None = None  # seconds; None for the server's own
    streamed: int | None = None
    # An answer that calls tools instead: ``[(name, arguments), ...]``, each given the id ``call-N``.
    tool_calls: list[tuple[str, Any]] | None = None
    # Asked with ``stream: true``: seconds between two tokens (the content's words) as they are sent.
    token_delay: float = 0.0
    # Asked with ``stream: true``: the connection drops after this many tokens (a worker sees an
    # answer cut short).
    cut_after: int | None = None
    # Asked with ``stream: true``: the answer stops after this many tokens until the test calls
    # `ChatServer.go_on` (a page seen mid-answer, at a moment of the test's choosing).
    pause_after: int | None = None


class ChatServer:
    """The server's state and app; ``start`` runs it on a thread of the calling process."""

    def __init__(self, *, latency: float = 0.0, content: str = '{"ok": true}', model: str = "local-chat-1") -> None:
        self.latency = latency
        # When set, every call waits until this many are in flight (or `hold_timeout` passes):
        # proof that a client holds that many at once, whatever the machine's speed.
        self.hold_until: int | None = None
        self.hold_timeout = 120.0
        self._held: asyncio.Event | None = None
        self.released_at: float | None = None  # wall-clock time the held calls were let go
        self.content = content
        self.model = model
        self.script: deque[Reply] = deque()
        # Replies for the requests whose messages contain a marker, before the script's.
        self.scripts_for: dict[str, deque[Reply]] = {}
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self.streamed_bytes = 0  # of streamed replies, what the clients took before they stopped reading
        self._paused = threading.Event()  # set: a reply with `pause_after` goes on
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._complete, methods=["POST"]),
                # For a process that runs it as a subprocess (`make bench`): counts, and a fresh start.
                Route("/stats", self._stats, methods=["GET"]),
                Route("/reset", self._reset, methods=["POST"]),
                Route("/hold", self._set_hold, methods=["POST"]),
                Route("/script", self._script, methods=["POST"]),
            ]
        )
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def reply(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in order."""
        self.script.extend(replies)

    def go_on(self) -> None:
        """Let replies stopped at their `Reply.pause_after` go on (and any later one pass it)."""
        self._paused.set()

    async def _stats(self, request: Request) -> Response:
        return JSONResponse(
            {
                "requests": len(self.requests),
                "peakInFlight": self.peak_in_flight,
                "releasedAt": self.released_at,
                "streamedBytes": self.streamed_bytes,
            }
        )

    async def _script(self, request: Request) -> Response:
        """``POST /script[?for=MARKER]`` with a list of `Reply` fields: queue those replies, for
        the requests whose messages contain MARKER if it is given (`make hostile`)."""
        replies = [Reply(**fields) for fields in await request.json()]
        marker = request.query_params.get("for")
        queue = self.script if marker is None else self.scripts_for.setdefault(marker, deque())
        queue.extend(replies)
        return JSONResponse({"queued": len(queue)})

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self.scripts_for:
            messages = json.dumps(body.get("messages", []))
            for marker, replies in self.scripts_for.items():
                if replies and marker in messages:
                    return replies.popleft()
        return self.script.popleft() if self.script else Reply(content=self.content)

    async def _reset(self, request: Request) -> Response:
        self.requests.clear()
        self.peak_in_flight = 0
        self.hold_until, self._held, self.released_at = None, None, None
        return JSONResponse({"requests": 0})

    async def _set_hold(self, request: Request) -> Response:
        """``POST /hold?until=N``: the next calls wait until N are in flight, then take the latency."""
        self.hold_until, self._held, self.released_at = int(request.query_params["until"]), None, None
        return JSONResponse({"holdUntil": self.hold_until})

    async def _complete(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append({**body, "authorization": request.headers.get("authorization")})
        reply = self._next_reply(body)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if self.hold_until is not None:
                await self._hold()
            await asyncio.sleep(self.latency if reply.latency is None else reply.latency)
        finally:
            self.in_flight -= 1
        if reply.body is not None:
            return Response(reply.body, status_code=reply.status, media_type="application/json")
        if reply.streamed is not None:
            return StreamingResponse(
                self._stream(reply.streamed), status_code=reply.status, media_type="application/json"
            )
        content = reply.content if reply.content is not None else self.content
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reply.tool_calls is not None:
            message = {"role": "assistant", "content": reply.content, "tool_calls": _calls(reply.tool_calls)}
            content = json.dumps(message["tool_calls"])
        prompt_words = sum(len(str(sent.get("content", "")).split()) for sent in body.get("messages", []))
        completion = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}
            ],
            "usage": {
                "prompt_tokens": prompt_words,
                "completion_tokens": len(content.split()),
                "total_tokens": prompt_words + len(content.split()),
            },
        }
        if body.get("stream") and reply.status == 200:
            return StreamingResponse(self._events(completion, reply), media_type="text/event-stream")
        return JSONResponse(completion, status_code=reply.status)

    async def _events(self, completion: dict[str, Any], reply: Reply) -> AsyncIterator[bytes]:
        """The completion as server-sent chunks, as OpenAI streams it: one token (a word) per
        chunk's ``delta``, the calls in one, then the finish reason and the usage."""
        message = completion["choices"][0]["message"]
        head = {key: completion[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

        def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return f"data: {json.dumps(head | {'choices': [choice]} | more)}\n\n".encode()

        yield chunk({"role": "assistant", "content": ""})
        words = (message.get("content") or "").split(" ")
        for index, word in enumerate(words):
            if reply.cut_after is not None and index >= reply.cut_after:
                return
            if index == reply.pause_after:
                await asyncio.to_thread(self._paused.wait, 120)  # a hang guard, not a timing
            yield chunk({"content": word if index == len(words) - 1 else word + " "})
            await asyncio.sleep(reply.token_delay)
        for position, call in enumerate(message.get("tool_calls") or []):
            yield chunk({"tool_calls": [{"index": position, **call}]})
        yield chunk({}, completion["choices"][0]["finish_reason"])
        yield f"data: {json.dumps(head | {'choices': [], 'usage': completion['usage']})}\n\n".encode()
        yield b"data: [DONE]\n\n"

    async def _stream(self, size: int) -> AsyncIterator[bytes]:
        head = json.dumps({"model": self.model, "choices": [{"index": 0, "message": {"role": "assistant"}}]})
        # The content goes last: `{..., "message": {"role": "assistant", "content": "aaa..."}}]}`.
        yield head.removesuffix("}}]}").encode() + b', "content": "'
        chunk = b"a" * (1 << 16)
        for offset in range(0, size, len(chunk)):
            part = chunk[: size - offset]
            self.streamed_bytes += len(part)
            yield part
            await asyncio.sleep(0)  # let the server see a client that has gone
        yield b'"}}]}'

    async def _hold(self) -> None:
        if self._held is None:
            self._held = asyncio.Event()
        if self.hold_until is not None and self.in_flight >= self.hold_until:
            self._release()
        try:
            await asyncio.wait_for(self._held.wait(), self.hold_timeout)
        except TimeoutError:
            self._release()  # release everyone: the test then sees the peak it got

    def _release(self) -> None:
        assert self._held is not None
        if not self._held.is_set():
            self.released_at = time.time()
            self._held.set()

    def start(self, port: int = 0) -> str:
        """Serve on 127.0.0.1 from a background thread; returns the API root (``.../v1``)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, backlog=2048)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the chat server did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        return self.url

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)


def _calls(calls: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls as a chat completion carries them (arguments as a JSON string, as OpenAI sends them)."""
    return [
        {
            "id": f"call-{index}",
            "type": "function",
            "function": {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)},
        }
        for index, (name, arguments) in enumerate(calls, 1)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--content", default='{"ok": true}', help="the answer's text")
    args = parser.parse_args()
    config = uvicorn.Config(
        ChatServer(latency=args.latency, content=args.content).app,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        backlog=2048,
    )
    print(json.dumps({"url": f"http://127.0.0.1:{args.port}/v1"}), flush=True)
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
