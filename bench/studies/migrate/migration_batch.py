"""The migration section's batch: every waiting run of the bench agent moved to version 2 at once.

The one place the section asks DSMO to migrate a batch, as a user would: `DsmoClient.migrate`
selects the runs through visibility and moves them at the given concurrency. Its answer is the
batch report's JSON (`BatchReport.to_json()`: the summary by outcome and one outcome per run).
"""

from __future__ import annotations

from typing import Any

from dsmo.client.dsmo_client import DsmoClient
from dsmo.workflows.definition.model import AgentDefinition


async def migrate_batch(
    dsmo: DsmoClient, agent: str, source: AgentDefinition, target: AgentDefinition, *, concurrency: int
) -> dict[str, Any]:
    """Move the open runs of ``agent`` on ``source`` to ``target``, ``concurrency`` at a time.

    Returns:
        The batch report: ``{"operation", "query", "dryRun", "startedAt", "finishedAt",
        "summary": {"done", "would", "skipped", "refused", "failed", "refusedByReason", "total"},
        "runs": [{"runId", "outcome", "reason", "detail"}]}``.
    """
    report = await dsmo.migrate(
        agent, target, from_version=source.workflow_version, reason="benchmark", by="bench", concurrency=concurrency
    )
    return report.to_json()
