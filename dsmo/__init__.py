"""DSMO: durable, deterministic, auditable agent executions on Temporal.

The public API. Everything a program that starts and drives runs needs is importable from
here; the subpackages (`dsmo.workflows`, `dsmo.activities`, `dsmo.client`, ...) are DSMO's inside
and may change between releases.

Example:
    ```python
    import asyncio
    from dsmo import DsmoClient, load_definition

    async def main() -> None:
        client = await DsmoClient.connect()
        definition = load_definition("examples/onboarding.yaml")
        run = await client.start(definition, {"applicantName": "Ada"})
        print(await run.status())

        # Or publish it once, then start runs by the agent's name (its latest version):
        await client.definitions.publish(definition)
        run = await client.start(definition.agent, {"applicantName": "Ada"})
        async for row in client.runs(agent=definition.agent):
            print(row.run_id, row.status, row.waiting_for)

    asyncio.run(main())
    ```

Your own agents, actions and channels are registered with the `agent`, `action` and
`channel` decorators in a module the worker loads (`dsmo worker --load my_project.agents`):

    ```python
    import dsmo

    @dsmo.agent("risk-score", version="1.0.0")
    async def risk_score(document, message):
        return {"score": 0.2}, {"band": "low"}
    ```
"""

from __future__ import annotations

from dsmo import errors, settings
from dsmo.activities.actions import ActionContext
from dsmo.activities.local_call import call_agent
from dsmo.activities.messaging import Channel
from dsmo.activities.plugins import action, agent, channel
from dsmo.activities.processors import ProcessorOutput
from dsmo.activities.progress_log import report_progress as progress
from dsmo.client.batches import BatchReport, RunOutcome
from dsmo.client.compensations import FailedCompensation
from dsmo.client.definition_files import load_definition, parse_definition_text
from dsmo.client.definitions_client import Definitions, Published, PublishedAgent
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.erasure import ErasureReport
from dsmo.client.flow_starts import StartReport
from dsmo.client.monitoring import RunSummary, StatusCount, WaitingRun
from dsmo.client.redrive import DeadLetterRow
from dsmo.client.replay import ReplayReport
from dsmo.client.run_archive import ArchiveVerification, verify_archive
from dsmo.client.run_export import RunExport
from dsmo.client.run_handle import RunHandle, StartedRun
from dsmo.client.trail_store import TrailVerification
from dsmo.client.what_if import WhatIfReport

# Kept importable from `dsmo` for programs written before `dsmo.errors` and `dsmo.settings`; not
# in `__all__` (a star import brings the two namespaces, not 36 more names), gone in a later release.
from dsmo.errors import *  # noqa: F403
from dsmo.runtime.exits import hard_exit
from dsmo.settings import *  # noqa: F403
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import (
    RequestReceipt,
    SendMessageRequest,
    SendRequest,
    SentMessage,
    StageMessage,
)
from dsmo.workflows.contracts.migration_io import MigrationAck
from dsmo.workflows.contracts.rewind_io import RewindAck
from dsmo.workflows.contracts.run_records import AuditEvent, ExecutionRequest, ExecutionResult, StatusView, TrailView
from dsmo.workflows.definition.model import AgentDefinition, RateLimit
from dsmo.workflows.events.resume_events import EventAck

__all__ = [
    "ActionContext",
    "AgentDefinition",
    "ArchiveVerification",
    "AuditEvent",
    "BatchReport",
    "Channel",
    "DeadLetterRow",
    "Definitions",
    "DsmoClient",
    "ErasureReport",
    "EventAck",
    "ExecutionRequest",
    "ExecutionResult",
    "FailedCompensation",
    "MigrationAck",
    "ProcessorOutput",
    "Published",
    "PublishedAgent",
    "RateLimit",
    "ReplayReport",
    "RequestReceipt",
    "RewindAck",
    "RunExport",
    "RunHandle",
    "RunOutcome",
    "RunStatus",
    "RunSummary",
    "SendMessageRequest",
    "SendRequest",
    "SentMessage",
    "StageMessage",
    "StartReport",
    "StartedRun",
    "StatusCount",
    "StatusView",
    "TrailVerification",
    "TrailView",
    "WaitingRun",
    "WhatIfReport",
    "action",
    "agent",
    "call_agent",
    "channel",
    "errors",
    "hard_exit",
    "load_definition",
    "parse_definition_text",
    "progress",
    "settings",
    "verify_archive",
]
