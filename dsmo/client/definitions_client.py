"""`client.definitions`: the published definitions of agents, and publishing one with the check
that the workers offer what it names.

A run started by an agent's name runs its latest published definition; one whose `run_agent` or
`invoke` nodes name something no worker offers would fail at its first such node, days later
perhaps. So `publish` asks the workers polling the task queue first (their published catalog) and
refuses with the names; when no worker polls or Temporal cannot be asked, nobody can check, and the
report says so.
"""

from __future__ import annotations

import asyncio
import builtins
from dataclasses import dataclass
from typing import Any

from temporalio.service import RPCError

from dsmo.activities.plugin_errors import UnknownAgent
from dsmo.client import agent_catalog
from dsmo.client.agent_catalog import missing_from
from dsmo.client.client_errors import DefinitionNotFound, NotOffered
from dsmo.client.core import ClientCore
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import workflow_version_problem
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.definition.node_types import InvokeNode, LlmNode, RunAgentNode


@dataclass(frozen=True)
class PublishedAgent:
    """An agent with published definitions (what `DsmoClient.definitions` lists).

    Attributes:
        agent: The agent's name.
        latest: The ``workflow_version`` a start by name runs.
        versions: Every published ``workflow_version``, oldest first.
    """

    agent: str
    latest: str
    versions: list[str]


@dataclass(frozen=True)
class Published:
    """What `Definitions.publish` did.

    Attributes:
        uri: The snapshot in the store (``configs/{workflow_version}.json``).
        workflow_version: The version runs started by the agent's name now run.
        unchecked: Why nobody checked the workers offer what it names ("" when they were checked,
            or it names nothing a worker must offer).
    """

    uri: str
    workflow_version: str
    unchecked: str = ""


def mcp_tools_of(definition: AgentDefinition) -> set[tuple[str, str]]:
    """The MCP tools (server, tool) ``definition``'s `llm` nodes bind, which a worker's servers must list."""
    nodes = definition.nodes.values()
    return {(t.mcp.server, t.mcp.tool) for n in nodes if isinstance(n, LlmNode) for t in n.tools or [] if t.mcp}


def needs(definition: AgentDefinition) -> tuple[set[str], set[str]]:
    """The agents and actions ``definition`` names, which a worker must offer."""
    nodes = definition.nodes.values()
    tools = {tool.action for n in nodes if isinstance(n, LlmNode) for tool in n.tools or [] if tool.action}
    return {n.agent for n in nodes if isinstance(n, RunAgentNode)}, {
        n.action for n in nodes if isinstance(n, InvokeNode)
    } | tools


class Definitions:
    """The published definitions, by agent name: `client.definitions`.

    Calling it (``await client.definitions()``) lists them, as before it was a sub-client.

    Args:
        core: The client's core.
    """

    def __init__(self, core: ClientCore) -> None:
        self._core = core

    async def __call__(self) -> builtins.list[PublishedAgent]:
        """Every agent with a published definition (`list`)."""
        return await self.list()

    async def list(self) -> builtins.list[PublishedAgent]:
        """Every agent with a published definition.

        Returns:
            For each agent: its name, latest ``workflow_version`` and all published versions.
        """
        return await published_agents(self._core)

    async def publish(
        self, definition: AgentDefinition, *, check_offer: bool = True, task_queue: str | None = None
    ) -> Published:
        """Publish ``definition`` (write-once) and make it its agent's latest version.

        Args:
            definition: The definition (see `load_definition`).
            check_offer: First check the workers polling ``task_queue`` offer every agent and
                action it names.
            task_queue: Where its runs will run (default: the settings').

        Returns:
            Where it is stored, and whether the offer was checked.

        Raises:
            NotOffered: Workers poll the task queue and none offers something it names.
            DsmoError: The store refused the write (another definition holds this version).
        """
        unchecked = ""
        agents, actions = needs(definition)
        mcp_tools = mcp_tools_of(definition)
        if check_offer and (agents or actions or mcp_tools):
            unchecked = await self._check_offer(agents, actions, task_queue, mcp_tools)
        uri = await publish_unchecked(self._core, definition)
        return Published(uri, definition.workflow_version, unchecked)

    async def get(self, agent: str, version: str | None = None) -> AgentDefinition:
        """A published definition of ``agent``.

        Args:
            agent: The agent's name.
            version: The ``workflow_version`` wanted, or a ``version`` label as `resolve` takes
                it (default: the latest).

        Returns:
            The definition, as published.

        Raises:
            DefinitionNotFound: Nothing is published under ``agent``, or not ``version``.
        """
        return await definition(self._core, agent, version)

    async def resolve(self, agent: str, version: str) -> AgentDefinition:
        """A published version of ``agent``, named by its hash or by its ``version`` label.

        Args:
            agent: The agent's name.
            version: A ``workflow_version`` hash, or a label such as ``"2.0.0"``.

        Returns:
            The definition, as published.

        Raises:
            DefinitionNotFound: No published version has this hash or label, or two have the
                label (name the hash then).
        """
        return await resolve_version(self._core, agent, version)

    async def versions(self, agent: str) -> builtins.list[str]:
        """The published versions of ``agent``, oldest first.

        Args:
            agent: The agent's name.

        Returns:
            Their ``workflow_version`` hashes.

        Raises:
            DefinitionNotFound: Nothing is published under ``agent``.
        """
        return await versions(self._core, agent)

    async def catalog(self, task_queue: str | None = None) -> dict[str, Any] | None:
        """What the workers polling ``task_queue`` now offer, or None when none polls.

        Args:
            task_queue: The task queue (default: the settings').

        Returns:
            The union of the catalogs those workers published.
        """
        return await catalog(self._core, task_queue)

    async def _check_offer(
        self, agents: set[str], actions: set[str], task_queue: str | None, mcp_tools: set[tuple[str, str]]
    ) -> str:
        queue = task_queue or self._core.settings.temporal.task_queue
        named = ", ".join(sorted(agents | actions | {f"{server}/{tool}" for server, tool in mcp_tools}))
        try:
            offer = await catalog(self._core, queue)
        # A lazy client connects on its first call; a server it cannot reach fails that call with RuntimeError.
        except (DsmoError, RPCError, RuntimeError) as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            return f"Temporal cannot be reached ({first}), so nobody checked {named}"
        if offer is None:
            return f"no worker polls {queue}, so nobody checked {named}"
        missing = missing_from(offer, agents, actions, mcp_tools)
        if missing:
            hint = (
                "name its server in the workers' DSMO_MCP_SERVERS, or check the tool's name on it"
                if all(item.startswith("mcp tool ") for item in missing)
                else "load the plugin that registers it: dsmo worker --load MODULE"
            )
            raise NotOffered(f"no worker on {queue} offers {', '.join(missing)} ({hint})")
        return ""


async def publish_unchecked(core: ClientCore, definition: AgentDefinition) -> str:
    """Snapshot ``definition`` (write-once) and make it its agent's latest version, checking nothing.

    Raises:
        DsmoError: The store refused the write (another definition holds this version).
    """
    uri: str = await asyncio.to_thread(core.definition_store().publish, definition)
    return uri


async def published_agents(core: ClientCore) -> builtins.list[PublishedAgent]:
    """Every agent with a published definition, by name."""
    entries = await asyncio.to_thread(core.definition_store().agents)
    return [PublishedAgent(str(e["agent"]), str(e["latest"]), [str(v) for v in e["versions"]]) for e in entries]


async def definition(core: ClientCore, agent: str, version: str | None = None) -> AgentDefinition:
    """A published definition of ``agent``: ``version`` (its hash, or its label), or the latest.

    Raises:
        DefinitionNotFound: Nothing is published under ``agent``, or not ``version`` (named).
    """
    if version is not None and workflow_version_problem(version) is not None:  # a label, not a hash
        return await resolve_version(core, agent, version)
    try:
        found: AgentDefinition = await asyncio.to_thread(core.definition_store().resolve, agent, version)
    except UnknownAgent as err:
        raise DefinitionNotFound(str(err)) from None
    return found


async def versions(core: ClientCore, agent: str) -> builtins.list[str]:
    """The published versions of ``agent``, oldest first.

    Raises:
        DefinitionNotFound: Nothing is published under ``agent``.
    """
    try:
        found: builtins.list[str] = await asyncio.to_thread(core.definition_store().versions, agent)
    except UnknownAgent as err:
        raise DefinitionNotFound(str(err)) from None
    return found


async def catalog(core: ClientCore, task_queue: str | None = None) -> dict[str, Any] | None:
    """What the workers polling ``task_queue`` (default: the settings') offer; None when none polls.

    Raises:
        RPCError: Temporal cannot be asked who polls.
    """
    queue = task_queue or core.settings.temporal.task_queue
    return await agent_catalog.live_catalog(core.temporal, core.artifacts, queue)


async def resolve_version(core: ClientCore, agent: str, version: str) -> AgentDefinition:
    """A published version of ``agent``, named by its hash (``workflow_version``) or its ``version`` label.

    Raises:
        DefinitionNotFound: No published version of ``agent`` has this hash or label, or two
            have the label (name the hash then).
    """
    published = await versions(core, agent)
    if version in published:
        return await definition(core, agent, version)
    labelled = [found for wv in published if (found := await definition(core, agent, wv)).version == version]
    if len(labelled) == 1:
        return labelled[0]
    if labelled:
        hashes = ", ".join(found.workflow_version for found in labelled)
        raise DefinitionNotFound(
            f"version: {len(labelled)} published versions of {agent!r} are labelled {version!r} ({hashes}); "
            "name one by its hash"
        )
    raise DefinitionNotFound(f"version: agent {agent!r} has no published version {version!r} (hash or label)")
