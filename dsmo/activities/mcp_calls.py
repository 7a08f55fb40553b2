"""Calling a tool of an MCP server (Model Context Protocol), with the `mcp` package's client.

Each call opens a streamable-HTTP session to the server the worker's settings name (its address
and headers; the call's idempotency key as its ``Idempotency-Key`` header), calls the tool, and
closes it. A server that cannot be reached, or answers the protocol wrongly, is transient: the
call is retried like any tool call, with the same key. A tool that answers with an error
(``isError``) has answered: its error is the call's result, which the model reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from dsmo.activities.plugin_errors import UnknownAction
from dsmo.workflows.common.errors import DsmoError

McpServers = Mapping[str, tuple[str, dict[str, str]]]  # name -> (URL, headers), from the settings


class McpUnavailable(DsmoError):
    """The MCP server could not be reached or did not answer the call (transient: retried)."""

    code = "mcp_unavailable"


class UnknownMcpServer(UnknownAction):
    """A tool names an MCP server the worker's settings do not (configuration: not retried)."""

    code = "unknown_mcp_server"


async def call_mcp_tool(
    servers: McpServers, server: str, tool: str, arguments: dict[str, Any], key: str, timeout: timedelta
) -> tuple[Any, str | None]:
    """(result, error) of one call: the tool's structured result (else its text), or its error.

    Raises:
        UnknownMcpServer: The worker's settings name no server ``server``.
        McpUnavailable: The server did not answer.
    """
    # Imported here: only a worker that calls an MCP tool loads the client.
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import TextContent

    if server not in servers:
        known = ", ".join(servers) or "none"
        raise UnknownMcpServer(f"mcp server {server!r} is not in this worker's DSMO_MCP_SERVERS ({known})")
    url, headers = servers[server]
    seconds = timeout.total_seconds()
    http = httpx.AsyncClient(headers={**headers, "Idempotency-Key": key}, timeout=httpx.Timeout(seconds))
    try:
        async with (
            http,
            streamable_http_client(url, http_client=http) as (read, write, _),
            ClientSession(read, write, read_timeout_seconds=timeout) as session,
        ):
            await session.initialize()
            answer = await session.call_tool(tool, arguments, read_timeout_seconds=timeout)
    except Exception as err:  # noqa: BLE001 - any failure to reach or speak to the server is transient
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        # The server by name only: its address may carry a token, and this goes to the trail.
        raise McpUnavailable(f"mcp server {server}: {first.replace(url, '<url>')}"[:500]) from None
    texts = [block.text for block in answer.content if isinstance(block, TextContent)]
    if answer.isError:
        return None, (" ".join(texts) or "the tool answered with an error")[:500]
    if answer.structuredContent is not None:
        return answer.structuredContent, None
    return {"text": "\n".join(texts)}, None
