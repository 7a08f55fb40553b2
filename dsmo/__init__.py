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
        run_id = await client.start(definition, {"applicantName": "Ada"})
        print(await client.status(run_id))

        # Or publish it once, then start runs by the agent's name (its latest version):
        await client.publish(definition)
        run_id = await client.start(definition.agent, {"applicantName": "Ada"})
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

from dsmo.activities.actions import ActionContext
from dsmo.activities.local_call import call_agent
from dsmo.activities.messaging import Channel
from dsmo.activities.plugin_errors import ActionRefused, ContractViolation, InvalidInput, PluginError, UnknownAgent
from dsmo.activities.plugins import action, agent, channel
from dsmo.activities.processors import ProcessorOutput
from dsmo.client.batches import BatchReport, RunOutcome
from dsmo.client.client_errors import (
    AlreadyOnTarget,
    DefinitionNotFound,
    EventMalformed,
    EventNotAccepted,
    InvalidInputDocument,
    InvalidQuery,
    KeyBusy,
    MigrationNotAccepted,
    NoWorker,
    RewindNotAccepted,
    RunAlreadyExists,
    RunClosed,
    RunNotFound,
    RunNotStarted,
    TemporalUnavailable,
    WorkflowTaskFailing,
)
from dsmo.client.definition_files import load_definition, parse_definition_text
from dsmo.client.dsmo_client import DsmoClient, PublishedAgent
from dsmo.client.flow_starts import StartReport
from dsmo.client.monitoring import RunSummary
from dsmo.client.redrive import DeadLetterRow
from dsmo.client.replay import ReplayReport
from dsmo.client.trail_store import TrailVerification
from dsmo.config.codec_settings import CodecSettings
from dsmo.config.ingress_settings import IngressSettings
from dsmo.config.llm_settings import LlmSettings
from dsmo.config.messaging_settings import MessagingSettings
from dsmo.config.settings import Settings, SettingsError
from dsmo.config.store_settings import StoreSettings
from dsmo.config.temporal_settings import TemporalSettings
from dsmo.config.worker_settings import WorkerSettings
from dsmo.runtime.exits import hard_exit
from dsmo.workflows.common.errors import DefinitionError, DsmoError, IllegalTransition, TemplateError
from dsmo.workflows.common.identifiers import InvalidRunId
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import (
    RequestReceipt,
    SendMessageRequest,
    SendRequest,
    SentMessage,
    StageMessage,
)
from dsmo.workflows.contracts.run_records import AuditEvent, ExecutionResult, StatusView, TrailView
from dsmo.workflows.definition.model import AgentDefinition, RateLimit
from dsmo.workflows.events.resume_events import EventAck

__all__ = [
    "ActionContext",
    "ActionRefused",
    "AgentDefinition",
    "AlreadyOnTarget",
    "AuditEvent",
    "BatchReport",
    "Channel",
    "CodecSettings",
    "ContractViolation",
    "DeadLetterRow",
    "DefinitionError",
    "DefinitionNotFound",
    "DsmoClient",
    "DsmoError",
    "EventAck",
    "EventMalformed",
    "EventNotAccepted",
    "ExecutionResult",
    "IllegalTransition",
    "IngressSettings",
    "InvalidInput",
    "InvalidInputDocument",
    "InvalidQuery",
    "InvalidRunId",
    "KeyBusy",
    "LlmSettings",
    "MessagingSettings",
    "MigrationNotAccepted",
    "NoWorker",
    "PluginError",
    "ProcessorOutput",
    "PublishedAgent",
    "RateLimit",
    "ReplayReport",
    "RequestReceipt",
    "RewindNotAccepted",
    "RunAlreadyExists",
    "RunClosed",
    "RunNotFound",
    "RunNotStarted",
    "RunOutcome",
    "RunStatus",
    "RunSummary",
    "SendMessageRequest",
    "SendRequest",
    "SentMessage",
    "Settings",
    "SettingsError",
    "StageMessage",
    "StartReport",
    "StatusView",
    "StoreSettings",
    "TemplateError",
    "TemporalSettings",
    "TemporalUnavailable",
    "TrailVerification",
    "TrailView",
    "UnknownAgent",
    "WorkerSettings",
    "WorkflowTaskFailing",
    "action",
    "agent",
    "call_agent",
    "channel",
    "hard_exit",
    "load_definition",
    "parse_definition_text",
]
