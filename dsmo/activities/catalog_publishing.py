"""What a worker offers — its agents, actions and channels — published where clients can read it.

At start a worker writes its catalog to ``catalog/{task_queue}/{identity}.json`` in the
artifact store (overwriting its previous one), with the tools its MCP servers list (listed again,
and the catalog rewritten, every few minutes). A client asks Temporal which workers poll the
task queue now and reads only their catalogs, so a stopped worker's offer is not counted.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from dsmo.activities.actions import ActionRegistry, CompensableAction, FunctionAction
from dsmo.activities.artifacts import ArtifactMissing, ArtifactStore, encode_json
from dsmo.activities.mcp_calls import McpServers, list_mcp_tools
from dsmo.activities.processors import ProcessorRegistry

PREFIX = "catalog"
log = logging.getLogger("dsmo.worker")
REFRESH_SECONDS = 300.0  # how often a worker with MCP servers lists their tools again


def describe(processors: ProcessorRegistry, actions: ActionRegistry, channels: Iterable[str]) -> dict[str, Any]:
    """A worker's offer as JSON: every agent version with its schemas, every action and channel."""
    return {
        "agents": [
            {
                "name": processor.name,
                "version": processor.version,
                "kind": "agent",
                # "blocking": an async def declared blocking, run on the processor threads
                "mode": ("blocking" if processor.blocking else "async") if processor.is_async else "sync",
                "description": processor.description,
                "inputSchema": processor.input_schema,
                "outputSchema": processor.output_schema,
                "summarySchema": processor.summary_schema,
            }
            for processor in processors.processors()
        ],
        "actions": [
            {
                "name": name,
                "kind": "action",
                "compensatable": _compensatable(actions.get(name)),
            }
            for name in actions.names()
        ],
        "channels": [{"name": name, "kind": "channel"} for name in sorted(channels)],
    }


def catalog_key(task_queue: str, identity: str) -> str:
    """Where the worker ``identity`` of ``task_queue`` writes its catalog."""
    return f"{PREFIX}/{quote(task_queue, safe='')}/{quote(identity, safe='@')}.json"


def publish(store: ArtifactStore, task_queue: str, identity: str, offer: dict[str, Any]) -> str:
    """Write a worker's catalog; returns its URI."""
    return store.put_json_bytes(catalog_key(task_queue, identity), encode_json(offer)).uri


def read(store: ArtifactStore, task_queue: str, identities: Iterable[str]) -> dict[str, Any]:
    """The union of the catalogs of the workers ``identities`` (those that wrote one).

    An MCP server counts as listed when any of them could list its tools.
    """
    sections = ("agents", "actions", "channels", "mcpServers", "mcpTools")
    merged: dict[str, dict[tuple[str, ...], dict[str, Any]]] = {section: {} for section in sections}
    for identity in identities:
        try:
            offer = json.loads(store.read_bytes(store.uri(catalog_key(task_queue, identity))))
        except ArtifactMissing:
            continue  # a worker of an older DSMO, or one that has not written yet
        for section, rows in merged.items():
            for row in offer.get(section, []):
                key = (row["name"], row.get("version", ""))
                listed = section == "mcpServers" and key in rows and rows[key]["listed"]
                rows[key] = {**row, "listed": True} if listed else row
    return {section: [rows[key] for key in sorted(rows)] for section, rows in merged.items()}


def with_mcp_tools(offer: dict[str, Any], listed: Mapping[str, list[str] | None]) -> dict[str, Any]:
    """``offer`` with the MCP servers the worker knows, and the tools of those it could list."""
    return {
        **offer,
        "mcpServers": [{"name": server, "listed": tools is not None} for server, tools in sorted(listed.items())],
        "mcpTools": [
            {"name": f"{server}/{tool}", "server": server, "tool": tool}
            for server, tools in sorted(listed.items())
            for tool in tools or []
        ],
    }


async def published(
    store: ArtifactStore,
    task_queue: str,
    identity: str,
    offer: dict[str, Any],
    mcp_servers: McpServers,
    every: float = REFRESH_SECONDS,
) -> asyncio.Task[None]:
    """Publish the worker's catalog now; then, in the task returned (cancel it when the worker
    stops), again with its MCP servers' tools, listed afresh every ``every`` seconds (a server
    that was down, or gained a tool). The first write waits for no server."""
    unlisted = with_mcp_tools(offer, dict.fromkeys(mcp_servers)) if mcp_servers else offer
    await asyncio.to_thread(publish, store, task_queue, identity, unlisted)

    async def refresh() -> None:
        while mcp_servers:
            try:
                listed = with_mcp_tools(offer, await list_mcp_tools(mcp_servers))
                await asyncio.to_thread(publish, store, task_queue, identity, listed)
            except Exception as err:  # noqa: BLE001 - the next round tries again; the worker goes on
                log.warning("the worker's catalog was not rewritten: %s", str(err).splitlines()[0] if str(err) else err)
            await asyncio.sleep(every)

    return asyncio.create_task(refresh())


def _compensatable(action: CompensableAction) -> bool:
    # An object action always has its compensate method; a function action only when given one.
    return action.undo is not None if isinstance(action, FunctionAction) else True
