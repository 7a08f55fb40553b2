"""What the store says of a start before the run starts: the run's input artifact and config
snapshot, written by the starter, and whether the store keeps a trail under the run's id.

The workflow would otherwise write them in a local activity at its start (two more workflow
activations per run). If the store cannot be reached at the start, the run still starts and
its workflow prepares it, retrying until the store is back.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from dsmo.activities.preparation import LeftoverInput, RunPreparer
from dsmo.client.client_errors import RunAlreadyExists
from dsmo.client.core import ClientCore
from dsmo.runtime.storage import artifact_store
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.activity_io import PreparedRun
from dsmo.workflows.contracts.run_records import ExecutionRequest
from dsmo.workflows.definition.model import effective_parameters

log = logging.getLogger("dsmo.client")


async def prepare(core: ClientCore, request: ExecutionRequest, run_id: str, version: str) -> PreparedRun | None:
    """Write the run's input artifact and config snapshot; None leaves it to the workflow.

    The workflow would otherwise do it in a local activity at its start (two more workflow
    activations per run). If the store cannot be reached now, the run still starts and its
    workflow prepares it, retrying until the store is back.
    """
    definition = request.definition

    def config() -> tuple[dict[str, Any], dict[str, Any]]:
        return definition.model_dump(mode="json", exclude_none=True), effective_parameters(definition)

    try:
        if core.preparer is None:
            core.preparer = RunPreparer(await asyncio.to_thread(artifact_store, core.settings))
        preparer, seal = core.preparer, request.subject.seal if request.subject else None
        try:
            return await asyncio.to_thread(
                lambda: preparer.prepare_run(run_id, version, request.input, config, seal=seal)
            )
        except LeftoverInput:
            # An earlier start of this id wrote its input and then failed, or a run has it.
            if await core.exists(run_id):
                raise RunAlreadyExists(f"run {run_id!r} already exists; choose another --id") from None
            return await asyncio.to_thread(
                lambda: preparer.prepare_run(run_id, version, request.input, config, replace_leftover=True, seal=seal)
            )
    except DsmoError:
        raise  # the store answered, and refused (a config snapshot that contradicts this version)
    except Exception as err:  # noqa: BLE001 - the workflow prepares the run itself
        log.warning("run %s: preparing at start failed (%s); the workflow will prepare it", run_id, err)
        return None


async def refuse_kept_trail(core: ClientCore, run_id: str) -> None:
    """Refuse a run id whose earlier run's audit trail the store still keeps.

    Temporal refuses an id while it keeps the run's history (`REJECT_DUPLICATE`), but forgets it
    after the namespace's retention, and a trail is often kept for longer: a new run under the
    id could then never export its own trail, and the old trail would read as the new run's.
    If the store cannot be reached the start goes on, as it does when preparing fails.

    Raises:
        RunAlreadyExists: The store keeps a trail for ``run_id``.
    """
    try:
        kept = await asyncio.to_thread(core.trail_store().kept, run_id)
    except Exception as err:  # noqa: BLE001 - Temporal still refuses an id whose run it knows
        log.warning("run %s: could not ask the store for an earlier trail (%s); starting", run_id, err)
        return
    if kept:
        raise RunAlreadyExists(f"run {run_id!r} already exists: the store keeps its audit trail; choose another --id")
