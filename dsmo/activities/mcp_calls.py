"""Calling a tool of an MCP server (Model Context Protocol), and listing its tools, with the `mcp`
package's client.

Each call opens a session to the server the worker's settings name: streamable HTTP (its address
and headers; the call's idempotency key as its ``Idempotency-Key`` header) or a process spoken to
over stdio (``stdio:COMMAND``); the key also travels in the call's ``_meta`` as ``idempotencyKey``.
It calls the tool and closes the session. A server that cannot be reached, or answers the protocol
wrongly, is transient: the call is retried like any tool call, with the same key. A tool that
answers with an error (``isError``) has answered: its error is the call's result, which the model
reads.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from dsmo.workflows.common.errors import DsmoError

McpServers = Mapping[str, tuple[str, dict[str, str]]]  # name -> (URL or stdio:COMMAND, headers), from the settings
LIST_TIMEOUT = timedelta(seconds=10)
MAX_LISTED = 1000  # tools kept of one server's list
log = logging.getLogger("dsmo.mcp")


class McpUnavailable(DsmoError):
    """The MCP server could not be reached or did not answer the call (transient: retried)."""

    code = "mcp_unavailable"


class UnknownMcpServer(DsmoError):
    """A tool names an MCP server this worker's settings do not. Retried like an unreachable
    server: during a rolling deploy another worker of the queue may name it (publishing refuses a
    server no worker names)."""

    code = "unknown_mcp_server"


async def call_mcp_tool(
    servers: McpServers, server: str, tool: str, arguments: dict[str, Any], key: str, timeout: timedelta
) -> tuple[Any, str | None]:
    """(result, error) of one call: the tool's structured result (else its text), or its error.

    Raises:
        UnknownMcpServer: The worker's settings name no server ``server``.
        McpUnavailable: The server did not answer.
    """
    from mcp.types import TextContent  # imported here: only a worker that calls an MCP tool loads it

    if server not in servers:
        known = ", ".join(servers) or "none"
        raise UnknownMcpServer(f"mcp server {server!r} is not in this worker's DSMO_MCP_SERVERS ({known})")
    address, headers = servers[server]
    try:
        async with _session(address, {**headers, "Idempotency-Key": key}, timeout) as session:
            answer = await session.call_tool(
                tool, arguments, read_timeout_seconds=timeout, meta={"idempotencyKey": key}
            )
    except Exception as err:  # noqa: BLE001 - any failure to reach or speak to the server is transient
        raise McpUnavailable(_unreached(server, address, err)) from None
    texts = [block.text for block in answer.content if isinstance(block, TextContent)]
    if answer.isError:
        return None, (" ".join(texts) or "the tool answered with an error")[:500]
    if answer.structuredContent is not None:
        return answer.structuredContent, None
    return {"text": "\n".join(texts)}, None


async def list_mcp_tools(servers: McpServers, timeout: timedelta = LIST_TIMEOUT) -> dict[str, list[str] | None]:
    """Each server's tools by name, or None for a server that did not answer (logged, not fatal:
    a server down when a worker starts is asked again at the next refresh)."""
    listed: dict[str, list[str] | None] = {}
    for server, (address, headers) in servers.items():
        try:
            async with _session(address, headers, timeout) as session:
                names: list[str] = []
                cursor: str | None = None
                while True:  # the list may come in pages
                    page = await session.list_tools(cursor)
                    names += [tool.name for tool in page.tools]
                    cursor = page.nextCursor
                    if not cursor or len(names) >= MAX_LISTED:
                        break
            listed[server] = sorted(names)[:MAX_LISTED]
        except Exception as err:  # noqa: BLE001 - a server that cannot be listed now is not the worker's failure
            log.warning("%s; its tools are not listed", _unreached(server, address, err))
            listed[server] = None
    return listed


@asynccontextmanager
async def _session(address: str, headers: dict[str, str], timeout: timedelta) -> AsyncIterator[Any]:
    """An initialized client session to the server at ``address`` (a URL, or ``stdio:COMMAND``)."""
    import httpx
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if address.startswith("stdio:"):
        # A process per session, with the mcp package's default environment: the worker's own
        # secrets are not handed to it (put what it needs in its command: `env KEY=... cmd`).
        command = shlex.split(address.removeprefix("stdio:"))
        params = StdioServerParameters(command=command[0], args=command[1:])
        async with (
            stdio_client(params) as (read, write),  # its stderr is the worker's
            ClientSession(read, write, read_timeout_seconds=timeout) as session,
        ):
            await session.initialize()
            yield session
        return
    http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout.total_seconds()))
    async with (
        http,
        streamable_http_client(address, http_client=http) as (read, write, _),
        ClientSession(read, write, read_timeout_seconds=timeout) as session,
    ):
        await session.initialize()
        yield session


def _unreached(server: str, address: str, err: BaseException) -> str:
    # The server by name only: its address may carry a token, and this goes to the trail.
    while isinstance(err, BaseExceptionGroup) and err.exceptions:  # the client's task groups wrap the cause
        err = err.exceptions[0]
    first = str(err).splitlines()[0] if str(err) else type(err).__name__
    return f"mcp server {server}: {first.replace(address, '<url>')}"[:500]
