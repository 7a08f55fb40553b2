"""The HTTP side of every model call a worker makes: the pooled httpx clients and the capped read.

`llm` stages (`llm_stage`) and any plugin that calls a chat model (DSMO's example `llm-summarize`)
go out through these clients, on the worker's event loop, and read each answer under the same
cap (``DSMO_LLM_MAX_RESPONSE_BYTES``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from dsmo.activities.llm_streaming import read_streamed

# The largest response a call reads (``DSMO_LLM_MAX_RESPONSE_BYTES``): ~1M tokens of JSON.
DEFAULT_MAX_RESPONSE_BYTES = 4 << 20

# httpx's connection pool (httpcore) re-examines every connection it holds, once per idle
# connection, each time a response closes: work that grows with the square of the pool. With 200
# calls in flight through one client that took ~70% of the worker's Python time as the answers
# came back. Calls are spread round-robin over this many clients (~13 connections each at 200).
CLIENT_POOLS = 16


def new_http_client() -> httpx.AsyncClient:
    """One of the pooled clients model calls go out through.

    Returns:
        An uncompressed client (the cap counts the bytes held) with no connection limit.
    """
    return httpx.AsyncClient(
        timeout=httpx.Timeout(120.0, connect=10.0),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        headers={"Accept-Encoding": "identity"},  # the cap counts bytes held: no chunk may inflate past it
    )


async def read_capped(response: httpx.Response, cap: int) -> tuple[bytes, str | None]:
    """A streamed response's body, read up to ``cap`` bytes.

    A successful response above the cap is refused, unread; an error's body is cut there (only
    its first lines are ever shown).

    Args:
        response: The response of a streamed request, not read yet.
        cap: The most bytes read (``DSMO_LLM_MAX_RESPONSE_BYTES``).

    Returns:
        The body (empty when refused), and why it was refused, or None.
    """
    setting = "DSMO_LLM_MAX_RESPONSE_BYTES"
    declared = response.headers.get("content-length", "")
    if response.is_success and declared.isdigit() and int(declared) > cap:
        return b"", f"the response declares {int(declared):,} bytes, above the {cap:,}-byte cap ({setting})"
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            if response.is_success:
                return b"", f"the response is larger than the {cap:,}-byte cap ({setting}); read no further"
            return b"".join(chunks)[:cap], None
    return b"".join(chunks), None


async def post_answer(
    client: httpx.AsyncClient,
    url: str,
    request: dict[str, Any],
    headers: dict[str, str],
    cap: int,
    on_text: Callable[[str], Awaitable[None]] | None = None,
) -> tuple[int, str, str | None]:
    """POST one chat-completions request and read its answer under ``cap``.

    An answer that streams (``text/event-stream``, asked with ``stream: true``) hands each piece
    of text to ``on_text`` as it arrives and is put back together as the completion a call
    without streaming gets (llm_streaming.py).

    Returns:
        The status, the body (empty when refused) and why it was refused, or None.

    Raises:
        httpx.HTTPError: No answer (refused connection, timeout, a connection cut short).
    """
    async with client.stream("POST", url, json=request, headers=headers) as response:
        streams = response.headers.get("content-type", "").startswith("text/event-stream")
        if on_text is not None and response.is_success and streams:
            body, refused = await read_streamed(response, cap, on_text)
            return response.status_code, body, refused
        raw, refused = await read_capped(response, cap)
        return response.status_code, raw.decode(response.encoding or "utf-8", errors="replace"), refused
