"""DSMO: durable, deterministic, auditable agent executions on Temporal.

The public API. Everything a program that starts and drives runs needs is importable from
here; the subpackages (`dsmo.workflows`, `dsmo.activities`, `dsmo.starter`) are DSMO's inside
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

    asyncio.run(main())
    ```
"""

from __future__ import annotations

from dsmo.starter.client.definitions import load_definition, parse_definition_text
from dsmo.starter.client.dsmo_client import (
    DsmoClient,
    EventNotAccepted,
    InvalidInputDocument,
    NoWorker,
    RunAlreadyExists,
    RunClosed,
    RunNotFound,
    RunNotStarted,
    TemporalUnavailable,
    WorkflowTaskFailing,
)
from dsmo.starter.exits import hard_exit
from dsmo.starter.settings import Settings, SettingsError
from dsmo.workflows.definition import AgentDefinition, RateLimit
from dsmo.workflows.errors import DefinitionError, DsmoError, IllegalTransition, TemplateError
from dsmo.workflows.events import EventAck
from dsmo.workflows.identifiers import InvalidRunId
from dsmo.workflows.records import AuditEvent, ExecutionResult, StatusView
from dsmo.workflows.status import RunStatus

__all__ = [
    "AgentDefinition",
    "AuditEvent",
    "DefinitionError",
    "DsmoClient",
    "DsmoError",
    "EventAck",
    "EventNotAccepted",
    "ExecutionResult",
    "IllegalTransition",
    "InvalidInputDocument",
    "InvalidRunId",
    "NoWorker",
    "RateLimit",
    "RunAlreadyExists",
    "RunClosed",
    "RunNotFound",
    "RunNotStarted",
    "RunStatus",
    "Settings",
    "SettingsError",
    "StatusView",
    "TemplateError",
    "TemporalUnavailable",
    "WorkflowTaskFailing",
    "hard_exit",
    "load_definition",
    "parse_definition_text",
]
