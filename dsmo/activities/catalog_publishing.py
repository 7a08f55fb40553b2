"""What a worker offers — its agents, actions and channels — published where clients can read it.

At start a worker writes its catalog to ``catalog/{task_queue}/{identity}.json`` in the
artifact store (overwriting its previous one). A client asks Temporal which workers poll the
task queue now and reads only their catalogs, so a stopped worker's offer is not counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from dsmo.activities.actions import ActionRegistry, CompensableAction, FunctionAction
from dsmo.activities.artifacts import ArtifactMissing, ArtifactStore, encode_json
from dsmo.activities.processors import ProcessorRegistry

PREFIX = "catalog"


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
    """The union of the catalogs of the workers ``identities`` (those that wrote one)."""
    merged: dict[str, dict[tuple[str, ...], dict[str, Any]]] = {"agents": {}, "actions": {}, "channels": {}}
    for identity in identities:
        try:
            offer = json.loads(store.read_bytes(store.uri(catalog_key(task_queue, identity))))
        except ArtifactMissing:
            continue  # a worker of an older DSMO, or one that has not written yet
        for section, rows in merged.items():
            for row in offer.get(section, []):
                rows[(row["name"], row.get("version", ""))] = row
    return {section: [rows[key] for key in sorted(rows)] for section, rows in merged.items()}


def _compensatable(action: CompensableAction) -> bool:
    # An object action always has its compensate method; a function action only when given one.
    return action.undo is not None if isinstance(action, FunctionAction) else True
