"""Publishes of one agent at the same time all stay in its definitions index (no lost update)."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.definition_store import DefinitionStore, index_key
from dsmo.config.settings import Settings
from dsmo.runtime.storage import artifact_store
from dsmo.workflows.definition.model import AgentDefinition, parse_definition


def version_of(agent: str, number: int) -> AgentDefinition:
    data: dict[str, Any] = {
        "agent": agent,
        "inputs": ["customer"],
        "start": "greet",
        "config": {"revision": number},  # a different definition, so a different version
        "nodes": {"greet": {"actionType": "send_message", "parameters": {"to": "x", "message": f"v{number}"}}},
    }
    return parse_definition(data)


def test_many_publishes_at_once_are_all_listed(store: ArtifactStore, stack_settings: Settings) -> None:
    agent = f"race-{uuid.uuid4().hex[:8]}"
    definitions = [version_of(agent, number) for number in range(24)]
    expected = {definition.workflow_version for definition in definitions}
    assert len(expected) == 24
    try:
        # Each thread its own store client, as separate CLI calls or consoles would be.
        with ThreadPoolExecutor(max_workers=12) as pool:
            list(pool.map(lambda d: DefinitionStore(artifact_store(stack_settings)).publish(d), definitions))

        listed = DefinitionStore(store).versions(agent)
        assert sorted(listed) == sorted(expected), f"lost {sorted(expected - set(listed))}"
        assert len(listed) == len(set(listed))
        latest = store.read_json(store.uri(index_key(agent)))["latest"]
        assert latest == listed[-1]
        assert DefinitionStore(store).resolve(agent).workflow_version == latest
    finally:
        store.delete_keys([index_key(agent)])


def test_a_republish_moves_the_version_to_latest_without_duplicating_it(store: ArtifactStore) -> None:
    agent = f"race-{uuid.uuid4().hex[:8]}"
    first, second = version_of(agent, 1), version_of(agent, 2)
    definitions = DefinitionStore(store)
    try:
        for definition in (first, second, first):
            definitions.publish(definition)
        assert definitions.versions(agent) == [second.workflow_version, first.workflow_version]
        assert definitions.resolve(agent).workflow_version == first.workflow_version
    finally:
        store.delete_keys([index_key(agent)])
