"""The stage activity: run one registered processor on artifacts, effectively once."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

from temporalio import activity

from activities.artifacts import ArtifactStore, encode_json, run_input_key, stage_output_key
from activities.errors import ContractViolation, permanent_errors
from activities.processors import ProcessorRegistry
from workflows.contracts import (
    RUN_STAGE,
    STORE_RUN_INPUT,
    SUMMARY_MAX_BYTES,
    StageMessage,
    StageSummary,
    StageTask,
    StoreRunInput,
)

_ATTEMPT = re.compile(r"/attempt=(\d+)/output\.json$")


class StageActivities:
    def __init__(
        self, store: ArtifactStore, registry: ProcessorRegistry, *, summary_max_bytes: int = SUMMARY_MAX_BYTES
    ) -> None:
        self.store = store
        self.registry = registry
        self.summary_max_bytes = summary_max_bytes

    @activity.defn(name=STORE_RUN_INPUT)
    @permanent_errors
    def store_run_input(self, request: StoreRunInput) -> str:
        """Snapshot the run's input as its first artifact; write-once, so retries are harmless."""
        return self.store.put_json_once(run_input_key(request.workflow_version, request.run_id), request.input).uri

    @activity.defn(name=RUN_STAGE)
    @permanent_errors
    def run_stage(self, task: StageTask) -> StageSummary:
        started = datetime.now(UTC)
        attempt = activity.info().attempt
        processor = self.registry.get(task.agent, task.agent_version)
        committed = self._committed_output(task)
        if committed is not None:
            # An earlier attempt wrote its output and then failed to report it: reuse, never redo.
            uri, committed_attempt = committed
            body = self.store.read_bytes(uri)
            return StageSummary(
                stage=task.stage,
                agent=task.agent,
                agent_version=processor.version,
                attempt=committed_attempt,
                artifact_out_uri=uri,
                output_sha256=hashlib.sha256(body).hexdigest(),
                output_bytes=len(body),
                summary=self._summary_of_reused(uri),
                reused=True,
                started_at=started,
                finished_at=datetime.now(UTC),
            )
        key = stage_output_key(task.workflow_version, task.run_id, task.stage, attempt)
        message = StageMessage(
            run_id=task.run_id,
            correlation_id=task.correlation_id,
            stage=task.stage,
            workflow_version=task.workflow_version,
            agent_version=processor.version,
            artifact_in_uri=task.artifact_in_uri,
            artifact_out_uri=self.store.uri(key),
            idempotency_key=task.idempotency_key,
            attempt=attempt,
            created_at=task.created_at,
            config_ref=task.config_ref,
        )
        document = self.store.read_json(task.artifact_in_uri)
        output = processor.fn(document, message)
        if not isinstance(output.document, dict):
            raise ContractViolation(f"agent {task.agent}: output must be a JSON object")
        summary_size = len(encode_json(output.summary))
        if summary_size > self.summary_max_bytes:
            raise ContractViolation(
                f"agent {task.agent}: summary is {summary_size} bytes, above the {self.summary_max_bytes}-byte cap; "
                "put large data in the output artifact"
            )
        # The summary travels inside the artifact too, so a reused output can be reported alike.
        stored = self.store.put_json_once(key, {"output": output.document, "summary": output.summary})
        return StageSummary(
            stage=task.stage,
            agent=task.agent,
            agent_version=processor.version,
            attempt=attempt,
            artifact_out_uri=stored.uri,
            output_sha256=stored.sha256,
            output_bytes=stored.size,
            summary=output.summary,
            reused=not stored.created,
            started_at=started,
            finished_at=datetime.now(UTC),
        )

    def _committed_output(self, task: StageTask) -> tuple[str, int] | None:
        prefix = f"artifacts/{task.workflow_version}/{task.run_id}/{task.stage}/"
        found = []
        for uri in self.store.list_uris(prefix):
            match = _ATTEMPT.search(uri)
            if match:
                found.append((int(match.group(1)), uri))
        if not found:
            return None
        attempt, uri = min(found)
        return uri, attempt

    def _summary_of_reused(self, uri: str) -> dict[str, object]:
        document = self.store.read_json(uri)
        summary = document.get("summary") if isinstance(document, dict) else None
        return summary if isinstance(summary, dict) else {}
