"""Published agent definitions in the object store, for `trigger_agent` and `dsmo definitions`.

`configs/{workflow_version}.json` holds a definition's immutable snapshot; the index
`definitions/{agent}.json` names the latest published version of each agent.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from botocore.exceptions import ClientError
from temporalio import activity

from dsmo.activities.artifacts import ArtifactMissing, ArtifactStore, encode_json
from dsmo.activities.plugin_errors import UnknownAgent, permanent_errors
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import agent_name_problem, workflow_version_problem
from dsmo.workflows.contracts.activity_io import RESOLVE_DEFINITION, ResolveDefinition
from dsmo.workflows.definition.model import AgentDefinition

# Conflicting publishes of one agent each retry; this many rounds is far beyond any real contention.
PUBLISH_ATTEMPTS = 50


class DefinitionIndexBusy(DsmoError):
    """An agent's definitions index kept changing while a publish tried to update it."""

    code = "definition_index_busy"


def config_key(workflow_version: str) -> str:
    return f"configs/{workflow_version}.json"


def index_key(agent: str) -> str:
    return f"definitions/{agent}.json"


class DefinitionStore:
    def __init__(self, store: ArtifactStore) -> None:
        self.store = store

    def publish(self, definition: AgentDefinition) -> str:
        """Snapshot the definition (write-once) and make it the agent's latest; returns the config URI.

        The index is updated by a conditional write (``If-None-Match: *`` when new, else
        ``If-Match`` its ETag) and re-read on a conflict, so publishes at once all stay listed.

        Raises:
            DefinitionIndexBusy: The index changed under every one of the attempts.
        """
        version = definition.workflow_version
        snapshot = {"workflowVersion": version, "definition": definition.model_dump(mode="json", exclude_none=True)}
        uri = self.store.put_json_once(config_key(version), snapshot).uri
        key = index_key(definition.agent)
        for attempt in range(PUBLISH_ATTEMPTS):
            index, etag = self._index_and_etag(definition.agent)
            versions = [v for v in index.get("versions", []) if v != version] + [version]
            body = encode_json({"agent": definition.agent, "latest": version, "versions": versions})
            if self._replace(key, body, etag):
                return uri
            # Another publish won this round: back off a little (spread, so they do not collide again).
            time.sleep(random.uniform(0, 0.02 * (attempt + 1)))
        raise DefinitionIndexBusy(
            f"definitions index of agent {definition.agent!r} changed {PUBLISH_ATTEMPTS} times while publishing "
            f"{version!r}; publish again"
        )

    def _replace(self, key: str, body: bytes, etag: str | None) -> bool:
        """Write ``body`` if ``key`` still holds the object with ``etag`` (None: no object); False if not."""
        if etag is None:
            return self.store.put_if_absent(key, body)
        try:
            self.store.s3.put_object(
                Bucket=self.store.bucket, Key=key, Body=body, ContentType="application/json", IfMatch=etag
            )
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") not in (
                "PreconditionFailed",
                "412",
                "ConditionalRequestConflict",
            ):
                raise
            return False
        return True

    def _index_and_etag(self, agent: str) -> tuple[dict[str, Any], str | None]:
        try:
            found = self.store.s3.get_object(Bucket=self.store.bucket, Key=index_key(agent))
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return {}, None
            raise
        data = json.loads(found["Body"].read())
        return (data if isinstance(data, dict) else {}), found["ETag"]

    def resolve(self, agent: str, version: str | None = None) -> AgentDefinition:
        # Both become parts of object keys: full-string checks before the store is asked.
        problem = agent_name_problem(agent) or (None if version is None else workflow_version_problem(version))
        if problem:
            raise UnknownAgent(problem)
        if version is None:
            version = self._index(agent).get("latest")
            if not version:
                raise UnknownAgent(f"agent {agent!r} has no published definition; run `dsmo definitions publish FILE`")
        try:
            snapshot = self.store.read_json(self.store.uri(config_key(version)))
        except ArtifactMissing:
            raise UnknownAgent(f"agent {agent!r} has no published version {version!r}") from None
        definition = AgentDefinition.model_validate(snapshot["definition"])
        if definition.agent != agent:
            raise UnknownAgent(f"version {version!r} belongs to agent {definition.agent!r}, not {agent!r}")
        return definition

    def agents(self) -> list[dict[str, Any]]:
        """Every agent with a published definition: ``{agent, latest, versions}``, by name."""
        found = []
        for uri in self.store.list_uris("definitions/"):
            index = self.store.read_json(uri)
            if isinstance(index, dict) and index.get("agent"):
                found.append(
                    {"agent": index["agent"], "latest": index.get("latest"), "versions": index.get("versions", [])}
                )
        return sorted(found, key=lambda entry: str(entry["agent"]))

    def versions(self, agent: str) -> list[str]:
        """An agent's published versions, oldest first.

        Raises:
            UnknownAgent: The name is not an agent name, or nothing was published under it.
        """
        problem = agent_name_problem(agent)
        if problem:
            raise UnknownAgent(problem)
        versions = self._index(agent).get("versions", [])
        if not versions:
            raise UnknownAgent(f"agent {agent!r} has no published definition; run `dsmo definitions publish FILE`")
        return [str(version) for version in versions]

    def _index(self, agent: str) -> dict[str, Any]:
        try:
            data = self.store.read_json(self.store.uri(index_key(agent)))
        except ArtifactMissing:
            return {}
        return data if isinstance(data, dict) else {}


class DefinitionActivities:
    def __init__(self, definitions: DefinitionStore) -> None:
        self.definitions = definitions

    @activity.defn(name=RESOLVE_DEFINITION)
    @permanent_errors
    def resolve_definition(self, request: ResolveDefinition) -> AgentDefinition:
        return self.definitions.resolve(request.agent, request.version)
