"""Forking a run: a new linked run that re-executes its original's record up to a node, then runs live.

Up to the node, the fork takes what the original did from its record, as `dsmo replay
--from-stage` does: stages before it reuse their committed outputs (no agent is called again),
waits take the recorded events, saga actions their recorded outcomes, and nothing is sent to
anyone. From the node on, it is a run like any other (see `workflows/changes/fork_point.py`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any

from dsmo.activities.artifacts import ArtifactStore
from dsmo.client import definitions_client, migration, moved_runs, replay, starts
from dsmo.client.core import ClientCore
from dsmo.client.record_lines import going_back_to
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import derived_run_id
from dsmo.workflows.contracts.migration_io import MigrationRequest
from dsmo.workflows.definition.corrections import correction_problem
from dsmo.workflows.definition.migration_checks import MigrationRefused, RunPosition, plan_migration
from dsmo.workflows.definition.model import AgentDefinition


async def fork(
    core: ClientCore,
    store: ArtifactStore,
    run_id: str,
    from_node: str,
    *,
    set_variables: Mapping[str, Any] | None = None,
    to: AgentDefinition | str | None = None,
    node_map: Mapping[str, str] | None = None,
    task_queue: str | None = None,
    new_id: str | None = None,
    reason: str = "",
    by: str = "user",
) -> str:
    """Start the fork; its run id. Every refusal is raised before anything is started."""
    planned = await replay.plan_replay(core, store, run_id, from_node, live=True, option="--from")
    plan = planned.request.replay
    assert plan is not None
    # Its record is being rewritten: what a fork would take from it is known once the run is back.
    back_to = None if planned.original.status.terminal else going_back_to(planned.events)
    if back_to is not None:
        raise DsmoError(
            f"--from: run {run_id} is going back to {back_to!r} (a rewind is under way); fork it once it is there"
        )
    source = moved_runs.version_now(planned.request.definition, plan.moves)  # where the fork goes live
    for name in set_variables or {} if to is None else {}:  # with `to`, the move's checks judge them
        problem = correction_problem(source, from_node, name)
        if problem is not None:
            raise DsmoError(f"--set: {problem}")
    fork_to = None
    if to is not None:
        target = (
            to if isinstance(to, AgentDefinition) else await definitions_client.resolve_version(core, source.agent, to)
        )
        fork_to = MigrationRequest(
            definition=await migration.published_target(core, target),
            node_map=dict(node_map or {}),
            set=dict(set_variables or {}),
            requested_by=by,
            reason=reason or f"fork of {run_id} from {from_node}",
        )
        try:  # the variables are the fork's own only once it gets there: the node is what can be checked now
            plan_migration(source, target, RunPosition(node=from_node), fork_to.node_map)
        except MigrationRefused as err:
            raise DsmoError(f"--version: {err}") from None
    request = planned.request.model_copy(
        update={
            "origin": {"forkOf": run_id, "fromNode": from_node},
            "replay": plan.model_copy(
                update={"live_from": from_node, "corrections": dict(set_variables or {}), "fork_to": fork_to}
            ),
        }
    )
    started = await starts.start_request(
        core, request, run_id=new_id or derived_run_id(run_id, "fork", uuid.uuid4().hex[:8]), task_queue=task_queue
    )
    forked = started.run_id
    # Listed under the original (`dsmo status`, the console), which may have ended: its trail is final.
    note = {"forkId": forked, "fromNode": from_node, "set": sorted(set_variables or {}), "by": by}
    await asyncio.to_thread(store.put_json_once, fork_key(run_id, forked), note)
    return forked


def fork_key(run_id: str, fork_id: str) -> str:
    """Where the store notes that ``fork_id`` forks ``run_id``."""
    return f"forks/{run_id}/{fork_id}.json"


def forks_of(store: ArtifactStore, run_id: str) -> list[dict[str, Any]]:
    """The forks started from ``run_id``: each one's id, the node it went live at, the variables set."""
    return [store.read_json(uri) for uri in sorted(store.list_uris(f"forks/{run_id}/")) if uri.endswith(".json")]
