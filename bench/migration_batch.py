"""The migration section's batch: every waiting run of the bench agent moved to version 2 at once.

The one place the section asks DSMO to migrate a batch, so the way it is asked can change here
alone. Its answer is the batch report's JSON (`BatchReport.to_json()`: the summary by outcome
and one outcome per run).
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from functools import partial
from typing import Any

from bench.jobs import bounded
from dsmo.starter.client.client_errors import AlreadyOnTarget, MigrationNotAccepted
from dsmo.starter.client.dsmo_client import DsmoClient
from dsmo.workflows.definition.model import AgentDefinition


async def migrate_batch(
    dsmo: DsmoClient,
    agent: str,
    source: AgentDefinition,
    target: AgentDefinition,
    run_ids: list[str],
    *,
    concurrency: int,
) -> dict[str, Any]:
    """Move the runs of ``agent`` on ``source`` to ``target``, ``concurrency`` at a time.

    Returns:
        The batch report: ``{"operation", "query", "dryRun", "startedAt", "finishedAt",
        "summary": {"done", "skipped", "refused", "failed", "total", ...}, "runs": [...]}``.
    """
    started = datetime.now(UTC)
    outcomes = await bounded(concurrency, [partial(_move, dsmo, run_id, target) for run_id in run_ids])
    counts = Counter(outcome["outcome"] for outcome in outcomes)
    return {
        "operation": "migrate",
        "query": f"AgentName = '{agent}' AND WorkflowVersion = '{source.workflow_version}'",
        "dryRun": False,
        "startedAt": started.isoformat(),
        "finishedAt": datetime.now(UTC).isoformat(),
        "summary": {key: counts.get(key, 0) for key in ("done", "skipped", "refused", "failed")}
        | {"total": len(outcomes)},
        "runs": outcomes,
    }


async def _move(dsmo: DsmoClient, run_id: str, target: AgentDefinition) -> dict[str, Any]:
    try:
        ack = await dsmo.migrate_run(run_id, target, reason="benchmark", by="bench")
    except AlreadyOnTarget as err:
        return {"runId": run_id, "outcome": "skipped", "reason": str(err)}
    except MigrationNotAccepted as err:
        return {"runId": run_id, "outcome": "refused", "reason": str(err)}
    except Exception as err:  # noqa: BLE001 - a failed run is counted, never stops the batch
        return {"runId": run_id, "outcome": "failed", "reason": f"{type(err).__name__}: {err}"}
    return {"runId": run_id, "outcome": "done", "detail": {"toNode": ack.to_node}}
