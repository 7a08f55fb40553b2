"""A model's answer read as it streams (``stream: true``): each token handed on as it arrives,
the whole answer put back together as the completion a call without streaming gets.

OpenAI-compatible endpoints stream server-sent events (``data: {chunk}``), each chunk's
``choices[0].delta`` holding the next text or a piece of a tool call, the last ones the finish
reason and, when asked for (``stream_options.include_usage``), the usage. The record of the call
keeps the completion put back together, so what is recorded, replayed and judged is the same
whether the answer streamed or not.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

OnText = Callable[[str], Awaitable[None]]


class StreamedAnswer:
    """The pieces of one streamed answer, joined as they arrive."""

    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None

    def take(self, chunk: dict[str, Any]) -> str | None:
        """Take one chunk; returns the text it adds, if any."""
        for name in ("id", "created", "model"):
            if name in chunk and name not in self.head:
                self.head[name] = chunk[name]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        choice = choices[0] if choices and isinstance(choices[0], dict) else {}
        if choice.get("finish_reason"):
            self.finish = choice["finish_reason"]
        delta = choice.get("delta") or {}
        for piece in delta.get("tool_calls") or []:
            call = self.calls.setdefault(int(piece.get("index", 0)), {"function": {"name": "", "arguments": ""}})
            for name in ("id", "type"):
                if piece.get(name):
                    call[name] = piece[name]
            function = piece.get("function") or {}
            call["function"]["name"] += function.get("name") or ""
            call["function"]["arguments"] += function.get("arguments") or ""
        text = delta.get("content")
        if isinstance(text, str) and text:
            self.text.append(text)
            return text
        return None

    def completion(self) -> str:
        """The answer as a chat completion (JSON text), as a call without streaming gets it."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) if self.text else None}
        if self.calls:
            message["tool_calls"] = [{"type": "function", **self.calls[index]} for index in sorted(self.calls)]
        body: dict[str, Any] = {
            "object": "chat.completion",
            **self.head,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
        }
        if self.usage is not None:
            body["usage"] = self.usage
        return json.dumps(body, ensure_ascii=False)


async def read_streamed(response: httpx.Response, cap: int, on_text: OnText) -> tuple[str, str | None]:
    """Read a streamed answer: ``(the completion as JSON text, why it was refused or None)``.

    ``on_text`` gets each piece of text as it arrives. An answer longer than ``cap`` bytes is
    refused there, as a call without streaming is.
    """
    answer, read = StreamedAnswer(), 0
    async for line in response.aiter_lines():
        read += len(line) + 1
        if read > cap:
            return (
                "",
                f"the response is larger than the {cap:,}-byte cap (DSMO_LLM_MAX_RESPONSE_BYTES); read no further",
            )
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            continue  # a keep-alive or a line this reader does not know: the answer is the rest
        text = answer.take(chunk) if isinstance(chunk, dict) else None
        if text is not None:
            await on_text(text)
    return answer.completion(), None
