"""What the workflow and its activities exchange: small models, references not payloads."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from dsmo.workflows.common.wire import WireModel
from dsmo.workflows.contracts.llm_call import LlmCall
from dsmo.workflows.contracts.subject_io import SubjectSeal

# Activity names, so the workflow can call them without importing their I/O code.
PREPARE_RUN = "prepare_run"
RUN_STAGE = "run_stage"
SEND_MESSAGE = "send_message"
WRITE_DEAD_LETTER = "write_dead_letter"
EXPORT_AUDIT = "export_audit"
WRITE_AUDIT_SEGMENT = "write_audit_segment"
STORE_EVENT_VALUES = "store_event_values"
HAND_OVER_ROUND_TRIP = "hand_over_round_trip"

SUMMARY_MAX_BYTES = 4096
# A run input up to this size travels with the tasks of the stages that read it (see StageTask).
INLINE_INPUT_MAX_BYTES = 4096


class PrepareRun(WireModel):
    """Snapshot what a run starts from: its input artifact and its immutable config."""

    run_id: str
    workflow_version: str
    input: dict[str, Any]
    definition: dict[str, Any]
    effective: dict[str, Any]
    # The run's data subject: its input artifact is sealed with the subject's data key.
    seal: SubjectSeal | None = None


class PreparedRun(WireModel):
    input_uri: str
    config_ref: str


# What a local stage attempt does about its `begun.json` mark (workflows/run/begun_marks.py).
BegunMark = Literal["mark", "skip", "recheck"]
MARK: BegunMark = "mark"  # write the mark; an existing one means the attempt began before
SKIP: BegunMark = "skip"  # no mark: the workflow task vouches the attempt never began
RECHECK: BegunMark = "recheck"  # write the mark, and look for a committed output either way


class StageTask(WireModel):
    """The orchestrator's half of the paper's message contract, for one attempt."""

    # Fields added later are hints a worker may do without (``input_document``): a worker that
    # predates one ignores it and does what it did before, instead of failing the attempt.
    model_config = ConfigDict(extra="ignore")  # merged with WireModel's (camelCase aliases)

    run_id: str
    correlation_id: str
    stage: str
    stage_path: str  # the stage's folder: the node id, or `{node}.v{n}` when a loop visits it again
    workflow_version: str
    agent: str
    agent_version: str | None = None
    artifact_in_uri: str
    idempotency_key: str
    attempt: int = 1
    created_at: datetime
    config_ref: str | None = None
    output_schema: str | None = None
    reuse_uri: str | None = None  # replay: report this earlier output instead of running the agent
    # The document at ``artifact_in_uri`` when that is the run's own input and it is small: the
    # workflow has it already (it came with the run's request, from which the starter wrote the
    # artifact), so the stage need not read it back from the store. The artifact stays the
    # stage's input of record (the audit trail names its URI).
    input_document: dict[str, Any] | None = None
    # An `llm` node's call; None for a registered processor. A worker that predates it ignores
    # it and finds no agent named `llm`: the stage fails permanently instead of guessing.
    llm: LlmCall | None = None
    # The run's data subject (contracts/subject_io.py): the stage seals what it writes with the
    # subject's data key, and opens the run's sealed artifacts with it. A worker that predates it
    # writes in the clear (upgrade workers before publishing definitions with a subject).
    seal: SubjectSeal | None = None
    # What a local attempt does about its `begun.json` mark (above); a worker that predates it marks.
    begun_mark: BegunMark = MARK


def inline_input(document: dict[str, Any]) -> dict[str, Any] | None:
    """The run input to send with its stages' tasks, or None when repeating it would grow the
    history by more than a summary's worth (the stage then reads the artifact)."""
    size = len(json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode())
    return document if size <= INLINE_INPUT_MAX_BYTES else None


class DeadLetter(WireModel):
    """Everything needed to reprocess a stage that could not succeed (`dlq/{run_id}/{stage}.json`)."""

    run_id: str
    stage: str
    agent: str
    agent_version: str | None = None
    workflow_version: str
    config_ref: str | None = None
    correlation_id: str
    artifact_in_uri: str = ""  # none when the run failed before its first stage
    idempotency_key: str
    attempts: int
    error_type: str
    # The infrastructure activity whose retry budget ran out, for a run dead-lettered before its
    # first node (stage is then the node a redrive starts at); None for a stage's own failure.
    service: str | None = None
    errors: list[str]
    variables: dict[str, Any]
    task_queue: str
    created_at: datetime
    # The run's data subject: the letter (its variables) is sealed with the subject's key. The
    # activity leaves it out of the letter it writes.
    seal: SubjectSeal | None = None


class StageMessage(WireModel):
    """The stage's message, as a processor receives it beside its input document.

    Attributes:
        run_id: The run.
        correlation_id: The caller's id for the run (its run id when none was given).
        stage: The `run_agent` node.
        workflow_version: The hash of the definition the run follows.
        agent_version: The processor version that runs.
        artifact_in_uri: The S3 URI of the input document.
        artifact_out_uri: The S3 URI the output will be written to (write-once).
        idempotency_key: The same for every attempt of this stage in this run.
        attempt: The stage attempt, from 1.
        created_at: When the stage was scheduled.
        config_ref: The S3 URI of the run's configuration snapshot.
    """

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
    inference: dict[str, Any] = Field(default_factory=dict)  # model, temperature, top_p, seed, prompt version
    reused: bool = False  # an earlier attempt's committed output was reported instead of running again
    workflow_version: str = ""  # echoed from the task; the orchestrator rejects a mismatch
    started_at: datetime
    finished_at: datetime


class SendMessageRequest(WireModel):
    """A message for a person, as a channel's ``send`` receives it.

    Attributes:
        run_id: The run.
        node: The `send_message` node.
        message: The rendered text.
        to: The recipient the node names, if any.
        channel: The channel the node names (None: the worker's default).
        idempotency_key: Deliver once per key: a retried activity sends the same key again.
    """

    run_id: str
    node: str
    message: str
    to: str | None = None
    channel: str | None = None
    idempotency_key: str


class SentMessage(WireModel):
    """A channel's receipt for a message.

    Attributes:
        message_id: The channel's id for it (DSMO uses the idempotency key when none is given).
        channel: The channel's name.
        duplicate: True when the channel had already sent it under this key.
    """

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
REQUEST_TOKEN = "request_token"
HAND_ON = "hand_on_deliveries"


class SendRequest(WireModel):
    """Ask a person for something the run will wait for: documents, a signature, a test.

    Attributes:
        run_id: The run.
        node: The request node.
        kind: ``document``, ``signature`` or ``test``.
        to: The recipient the node names, if any.
        message: The rendered text, if any.
        channel: The channel the node names (None: the worker's default).
        details: What is asked for: the documents, the signature's document, the test.
        idempotency_key: Deliver once per key.
    """

    run_id: str
    node: str
    kind: str  # document | signature | test
    to: str | None = None
    message: str | None = None
    channel: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str


class RequestReceipt(WireModel):
    """A channel's receipt for a request.

    Attributes:
        request_id: The channel's id for it (DSMO uses the idempotency key when none is given).
        channel: The channel's name.
        duplicate: True when the channel had already sent it under this key.
    """

    request_id: str
    channel: str
    duplicate: bool = False


class ResolveDefinition(WireModel):
    agent: str
    version: str | None = None


INVOKE_ACTION = "invoke_action"
COMPENSATE = "compensate_action"


class ActionTask(WireModel):
    """One side-effecting action; the key makes a retried attempt apply its effect once."""

    run_id: str
    node: str
    action: str
    input: dict[str, Any]
    idempotency_key: str
    attempt: int = 1


class ActionResult(WireModel):
    output: dict[str, Any] = Field(default_factory=dict)  # small: ids and statuses, never payloads
    # Which of Temporal's attempts succeeded: above 1, earlier ones failed or their worker died.
    attempt: int = 1


class CompensationTask(WireModel):
    """Undo one completed step: `comp:{run_id}:{node}` makes a second execution a no-op."""

    run_id: str
    node: str
    action: str
    kind: str
    output: dict[str, Any]
    key: str
    attempt: int = 1


class CompensationResult(WireModel):
    applied: bool  # False: already compensated (by this key) or nothing left to undo
    detail: str = ""
