"""Every error DSMO raises to a program, in one namespace: `from dsmo.errors import RunNotFound`.

Each is a `DsmoError` (bad input, a refusal, a run that cannot be found) with a one-line message
naming the field or the reason, and a stable ``code`` the HTTP ingress also answers with; the
plugin errors are what an agent or action raises to say why it refuses its input.
"""

from __future__ import annotations

from dsmo.activities.plugin_errors import ActionRefused, ContractViolation, InvalidInput, PluginError, UnknownAgent
from dsmo.client.client_errors import (
    AlreadyOnTarget,
    DefinitionNotFound,
    EventMalformed,
    EventNotAccepted,
    FlowControlBusy,
    InvalidInputDocument,
    InvalidQuery,
    KeyBusy,
    MigrationNotAccepted,
    NotOffered,
    NoWorker,
    RewindNotAccepted,
    RunAlreadyExists,
    RunClosed,
    RunNotFound,
    RunNotStarted,
    TemporalUnavailable,
    WorkflowTaskFailing,
)
from dsmo.config.settings import SettingsError
from dsmo.workflows.common.errors import DefinitionError, DsmoError, IllegalTransition, TemplateError
from dsmo.workflows.common.identifiers import InvalidRunId

__all__ = [
    "ActionRefused",
    "AlreadyOnTarget",
    "ContractViolation",
    "DefinitionError",
    "DefinitionNotFound",
    "DsmoError",
    "EventMalformed",
    "EventNotAccepted",
    "FlowControlBusy",
    "IllegalTransition",
    "InvalidInput",
    "InvalidInputDocument",
    "InvalidQuery",
    "InvalidRunId",
    "KeyBusy",
    "MigrationNotAccepted",
    "NoWorker",
    "NotOffered",
    "PluginError",
    "RewindNotAccepted",
    "RunAlreadyExists",
    "RunClosed",
    "RunNotFound",
    "RunNotStarted",
    "SettingsError",
    "TemplateError",
    "TemporalUnavailable",
    "UnknownAgent",
    "WorkflowTaskFailing",
]
