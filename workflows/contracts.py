"""What the workflow and its activities exchange: small models, references not payloads."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from workflows.wire import WireModel

# Activity names, so the workflow can call them without importing their I/O code.
STORE_RUN_INPUT = "store_run_input"
RUN_STAGE = "run_stage"
SEND_MESSAGE = "send_message"

SUMMARY_MAX_BYTES = 4096


class StoreRunInput(WireModel):
    run_id: str
    workflow_version: str
    input: dict[str, Any]


class StageTask(WireModel):
    """The orchestrator's half of the paper's message contract; the activity adds the attempt."""

    run_id: str
    correlation_id: str
    stage: str
    workflow_version: str
    agent: str
    agent_version: str | None = None
    artifact_in_uri: str
    idempotency_key: str
    created_at: datetime
    config_ref: str | None = None


class StageMessage(WireModel):
    """The paper's message contract, complete, as a processor receives it."""

    run_id: str
    correlation_id: str
    stage: str
    workflow_version: str
    agent_version: str
    artifact_in_uri: str
    artifact_out_uri: str
    idempotency_key: str
    attempt: int
    created_at: datetime
    config_ref: str | None = None


class StageSummary(WireModel):
    """All the orchestrator learns from a stage: where its output is and a small summary."""

    stage: str
    agent: str
    agent_version: str
    attempt: int
    artifact_out_uri: str
    output_sha256: str
    output_bytes: int
    summary: dict[str, Any] = Field(default_factory=dict)
    reused: bool = False  # the output of this attempt was already written (a retried activity)
    started_at: datetime
    finished_at: datetime


class SendMessageRequest(WireModel):
    run_id: str
    node: str
    message: str
    to: str | None = None
    channel: str | None = None
    idempotency_key: str


class SentMessage(WireModel):
    message_id: str
    channel: str
    duplicate: bool = False


def idempotency_key(run_id: str, stage: str, workflow_version: str, partition: str | None = None) -> str:
    """The paper's deterministic key: hash(run_id, stage, workflow_version[, partition])."""
    import hashlib

    parts = [run_id, stage, workflow_version] + ([partition] if partition else [])
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


SEND_REQUEST = "send_request"
RESOLVE_DEFINITION = "resolve_definition"
REQUEST_SLOT = "request_slot"
RELEASE_SLOT = "release_slot"


class SendRequest(WireModel):
    """Ask a person for something the run will wait for: documents, a signature, a test."""

    run_id: str
    node: str
    kind: str  # document | signature | test
    to: str | None = None
    message: str | None = None
    channel: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str


class RequestReceipt(WireModel):
    request_id: str
    channel: str
    duplicate: bool = False


class ResolveDefinition(WireModel):
    agent: str
    version: str | None = None


class SlotRequest(WireModel):
    agent: str
    run_id: str
    max_concurrent: int = 1
