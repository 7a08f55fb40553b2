"""`dsmo mcp`: DSMO as an MCP server, over stdio or streamable HTTP, authorised by the ingress's API keys.

Over stdio the server acts for one key, read from ``DSMO_MCP_KEY`` (the assistant that starts the
process holds it). Over HTTP each request presents its own (``Authorization: Bearer <key>`` or
``X-API-Key``): FastMCP's bearer authentication checks it against the key store, so an unknown
key is refused (401) before any MCP message is read, and each tool call checks its scope.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ContentBlock
from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.runtime.telemetry import setup_tracing
from dsmo.server.api_keys import ApiKey, KeyStore
from dsmo.server.ingress.serving import server_config
from dsmo.server.mcp_tools import DsmoTools, ToolContext
from dsmo.workflows.common.errors import DsmoError

KEY_VARIABLE = "DSMO_MCP_KEY"
DEFAULT_BIND = "127.0.0.1:8765"
INSTRUCTIONS = (
    "DSMO runs agents as durable state machines. Runs wait for people: list_tasks shows the waiting ones, "
    "run_status what one waits for (waitingFor, waitingData), and respond, deliver_event, decide or "
    "decide_budget resume it. Pass an event_id to make a retried event a duplicate, not a second event."
)


class DsmoMCP(FastMCP):
    """FastMCP whose refusals of a tool's arguments are one line naming the field, as DSMO's own are."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Sequence[ContentBlock] | dict[str, Any]:
        """Call the tool; arguments its signature refuses are an error naming the first bad field."""
        try:
            return await super().call_tool(name, arguments)
        except ToolError as err:
            if not isinstance(err.__cause__, ValidationError):
                raise
            first = err.__cause__.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "arguments"
            raise ToolError(f"Error executing tool {name}: {field}: {first['msg']}") from None


class KeyVerifier:
    """FastMCP's `TokenVerifier` over DSMO's key store: a bearer token is an API key.

    The store is read on each request, so a revoked key stops working at once.

    Args:
        keys: The ingress's key store.
    """

    def __init__(self, keys: KeyStore) -> None:
        self._keys = keys

    async def verify_token(self, token: str) -> AccessToken | None:
        """The key's name and scopes, or None for a key the store does not hold."""
        key = self._keys.verify(token)
        return AccessToken(token=token, client_id=key.name, scopes=list(key.scopes)) if key else None


class KeyCheck:
    """Finds the key a tool call was made with and refuses one without the scope.

    Args:
        keys: The ingress's key store.
        stdio_key: Over stdio, the key the process acts for (None over HTTP).
    """

    def __init__(self, keys: KeyStore, stdio_key: str | None) -> None:
        self._keys = keys
        self._stdio_key = stdio_key

    def __call__(self, ctx: ToolContext, scope: str) -> ApiKey:
        """The caller's key, if it holds ``scope``.

        Raises:
            ToolError: The key is unknown (revoked since) or lacks ``scope`` (named).
        """
        request = ctx.request_context.request  # the HTTP request that carried the call; None over stdio
        user = request.scope.get("user") if request is not None else None
        presented = user.access_token.token if isinstance(user, AuthenticatedUser) else self._stdio_key
        key = self._keys.verify(presented) if presented else None
        if key is None:
            raise ToolError("unknown API key")
        if not key.allows(scope):
            raise ToolError(f"key {key.name!r} lacks the scope {scope!r}")
        return key


class ApiKeyHeader:
    """ASGI middleware: an ``X-API-Key`` header is read as ``Authorization: Bearer``, as the ingress reads it.

    Args:
        app: The MCP application.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, with the header FastMCP's bearer authentication reads."""
        if scope["type"] == "http":
            headers = list(scope["headers"])
            names = {name.lower() for name, _ in headers}
            presented = next((value for name, value in headers if name.lower() == b"x-api-key"), None)
            if presented and b"authorization" not in names:
                scope = {**scope, "headers": [*headers, (b"authorization", b"Bearer " + presented)]}
        await self.app(scope, receive, send)


class ClientLeft(logging.Filter):
    """Drops the SDK's "Error in standalone SSE writer" when its cause is only a client that
    closed its session (anyio's ``ClosedResourceError``): the server logged a traceback for
    every session that ended, burying the errors worth reading."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False (drop it) for that message when its exception is a closed stream."""
        closed = bool(record.exc_info) and isinstance(record.exc_info[1], anyio.ClosedResourceError)  # type: ignore[index]
        return not (closed and record.getMessage() == "Error in standalone SSE writer")


def build_server(
    client: DsmoClient, keys: KeyStore, *, stdio_key: str | None = None, bind: str = DEFAULT_BIND
) -> FastMCP:
    """The FastMCP server with DSMO's tools.

    Args:
        client: The connected client the tools ask.
        keys: The key store (``settings.api_keys_path``).
        stdio_key: Over stdio: the key the process acts for. None over HTTP: each request's own.
        bind: Over HTTP: ``host:port`` (it sets which Host headers are accepted on loopback).

    Returns:
        The server; `serve` runs it.
    """
    host, port = split_bind(bind)
    options: dict[str, Any] = {}
    if stdio_key is None:
        # The key store is its own issuer: no OAuth server exists, so no metadata is served (no
        # resource_server_url); the issuer URL is required by AuthSettings and names this server.
        options = {
            "token_verifier": KeyVerifier(keys),
            "auth": AuthSettings(issuer_url=f"http://{host}:{port}", resource_server_url=None),
        }
    mcp = DsmoMCP("dsmo", instructions=INSTRUCTIONS, host=host, port=port, log_level="WARNING", **options)
    DsmoTools(client, KeyCheck(keys, stdio_key)).register(mcp)
    return mcp


def split_bind(bind: str) -> tuple[str, int]:
    """``host:port`` as its parts (``:8765`` listens on 127.0.0.1).

    Raises:
        DsmoError: The port is not a number.
    """
    host, _, port = bind.rpartition(":")
    if not port.isdigit():
        raise DsmoError(f"--bind: {bind!r} is not host:port")
    return host or "127.0.0.1", int(port)


def stdio_key(keys: KeyStore, env: dict[str, str] | None = None) -> str:
    """The key a stdio server acts for: ``DSMO_MCP_KEY``, which the store must hold.

    Raises:
        DsmoError: The variable is unset, or names no key of the store.
    """
    presented = (env if env is not None else dict(os.environ)).get(KEY_VARIABLE, "").strip()
    if not presented:
        raise DsmoError(f"{KEY_VARIABLE}: set it to an API key (create one with `dsmo keys add NAME --scope read ...`)")
    if keys.verify(presented) is None:
        raise DsmoError(f"{KEY_VARIABLE}: unknown API key (not in {keys.path})")
    return presented


async def serve(settings: Settings, *, http: bool, bind: str | None = None) -> None:
    """Run the MCP server until its client leaves (stdio) or the process is stopped (HTTP).

    Args:
        settings: Where Temporal, the store and the key file are.
        http: Serve streamable HTTP (at ``/mcp``) instead of stdio.
        bind: With ``http``: ``host:port`` (default ``127.0.0.1:8765``).

    Raises:
        DsmoError: Over stdio, ``DSMO_MCP_KEY`` is unset or unknown.
    """
    import uvicorn

    keys = KeyStore(settings.api_keys_path)
    key = None if http else stdio_key(keys)
    setup_tracing("dsmo-mcp")
    # Lazy: the server starts while Temporal is down, and each call says so until it is back.
    client = await DsmoClient.connect(settings, lazy=True)
    mcp = build_server(client, keys, stdio_key=key, bind=bind or DEFAULT_BIND)
    if not http:
        await mcp.run_stdio_async()
        # The SDK's stdio transport wraps stdout's buffer and closes it when it ends; the CLI's exit
        # flushes stdout, so it gets a stream that can be flushed.
        if sys.stdout.closed:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives until the process exits
        return
    host, port = split_bind(bind or DEFAULT_BIND)
    logging.getLogger("mcp.server.streamable_http").addFilter(ClientLeft())
    app = ApiKeyHeader(mcp.streamable_http_app())
    await uvicorn.Server(server_config(app, settings, host, port, log_level="warning")).serve()
