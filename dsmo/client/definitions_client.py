"""`client.definitions`: the published definitions of agents, and publishing one with the check
that the workers offer what it names.

A run started by an agent's name runs its latest published definition; one whose `run_agent` or
`invoke` nodes name something no worker offers would fail at its first such node, days later
perhaps. So `publish` asks the workers polling the task queue first (their published catalog) and
refuses with the names; when no worker polls or Temporal cannot be asked, nobody can check, and the
report says so.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio.service import RPCError

from dsmo.client.agent_catalog import missing_from
from dsmo.client.client_errors import NotOffered
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.definition.node_types import InvokeNode, RunAgentNode

if TYPE_CHECKING:
    from dsmo.client.dsmo_client import DsmoClient


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


def needs(definition: AgentDefinition) -> tuple[set[str], set[str]]:
    """The agents and actions ``definition`` names, which a worker must offer."""
    nodes = definition.nodes.values()
    return {n.agent for n in nodes if isinstance(n, RunAgentNode)}, {
        n.action for n in nodes if isinstance(n, InvokeNode)
    }


class Definitions:
    """The published definitions, by agent name: `client.definitions`.

    Calling it (``await client.definitions()``) lists them, as before it was a sub-client.

    Args:
        client: The client it asks through.
    """

    def __init__(self, client: DsmoClient) -> None:
        self._client = client

    async def __call__(self) -> builtins.list[PublishedAgent]:
        """Every agent with a published definition (`list`)."""
        return await self.list()

    async def list(self) -> builtins.list[PublishedAgent]:
        """Every agent with a published definition.

        Returns:
            For each agent: its name, latest ``workflow_version`` and all published versions.
        """
        return await self._client.published_agents()

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
        if check_offer and (agents or actions):
            unchecked = await self._check_offer(agents, actions, task_queue)
        uri = await self._client.publish(definition)
        return Published(uri, definition.workflow_version, unchecked)

    async def get(self, agent: str, version: str | None = None) -> AgentDefinition:
        """A published definition of ``agent``.

        Args:
            agent: The agent's name.
            version: The ``workflow_version`` wanted (default: the latest).

        Returns:
            The definition, as published.

        Raises:
            DefinitionNotFound: Nothing is published under ``agent``, or not ``version``.
        """
        return await self._client.definition(agent, version)

    async def versions(self, agent: str) -> builtins.list[str]:
        """The published versions of ``agent``, oldest first.

        Args:
            agent: The agent's name.

        Returns:
            Their ``workflow_version`` hashes.

        Raises:
            DefinitionNotFound: Nothing is published under ``agent``.
        """
        return await self._client.versions(agent)

    async def catalog(self, task_queue: str | None = None) -> dict[str, Any] | None:
        """What the workers polling ``task_queue`` now offer, or None when none polls.

        Args:
            task_queue: The task queue (default: the settings').

        Returns:
            The union of the catalogs those workers published.
        """
        return await self._client.catalog(task_queue)

    async def _check_offer(self, agents: set[str], actions: set[str], task_queue: str | None) -> str:
        queue = task_queue or self._client.settings.temporal.task_queue
        try:
            offer = await self._client.catalog(queue)
        # A lazy client connects on its first call; a server it cannot reach fails that call with RuntimeError.
        except (DsmoError, RPCError, RuntimeError) as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            return f"Temporal cannot be reached ({first}), so nobody checked {', '.join(sorted(agents | actions))}"
        if offer is None:
            return f"no worker polls {queue}, so nobody checked {', '.join(sorted(agents | actions))}"
        missing = missing_from(offer, agents, actions)
        if missing:
            raise NotOffered(
                f"no worker on {queue} offers {', '.join(missing)} (load the plugin that registers it: "
                "dsmo worker --load MODULE)"
            )
        return ""
