"""The stage activities: prepare a run, run one processor attempt on artifacts, dead-letter a stage.

`run_stage` is an async activity: an ``async def`` processor runs on the worker's event loop
(watched: see loop_watch.py) unless declared blocking, a plain one on the processor threads, and
the artifact reads and writes on those threads too (the S3 clients are synchronous), so one
worker can hold many slow model calls at once. A plain processor's stage takes one trip to the
threads; an async one's and an `llm` stage's several.

Longer than most modules because the stage's two paths (plain on the threads, async on the loop)
share its commit and its report, which must stay one piece of code.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import inspect
import json
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TypeVar

from opentelemetry import trace
from temporalio import activity
from temporalio.exceptions import ApplicationError

from dsmo.activities.artifacts import ArtifactStore, StoredArtifact, encode_json, stage_output_key
from dsmo.activities.heartbeats import heartbeating
from dsmo.activities.llm_stage import LlmStage
from dsmo.activities.maybe_async import call_maybe_async, is_async_callable
from dsmo.activities.plugin_errors import ContractViolation, InvalidInput, permanent_errors
from dsmo.activities.preparation import RunPreparer
from dsmo.activities.processors import Processor, ProcessorOutput, ProcessorRegistry, as_output
from dsmo.activities.progress_log import CURRENT as CURRENT_PROGRESS
from dsmo.activities.progress_log import ProgressLog, task_progress_folder
from dsmo.activities.schemas import check_output
from dsmo.workflows.contracts.activity_io import (
    PREPARE_RUN,
    RECHECK,
    RUN_STAGE,
    SKIP,
    SUMMARY_MAX_BYTES,
    WRITE_DEAD_LETTER,
    DeadLetter,
    PreparedRun,
    PrepareRun,
    StageMessage,
    StageSummary,
    StageTask,
)
from dsmo.workflows.contracts.subject_io import SUBJECT_KEY, SubjectKey, SubjectKeyRequest

T = TypeVar("T")
_ATTEMPT = re.compile(r"/attempt=(\d+)/output\.json$")
# A local attempt's mark that it began (beside its output): found by the same attempt run again
# without its output, it means the worker died in it.
BEGUN = "begun.json"
WORKER_LOST = "WorkerLost"
STAGE_OUTPUT_KIND = "dsmo.stage-output/v1"
LLM_STAGE_VERSION = "1.0.0"  # the agent version an `llm` stage records


class StageActivities:
    """The stage activities over one artifact store and one processor registry."""

    def __init__(
        self,
        store: ArtifactStore,
        registry: ProcessorRegistry,
        *,
        summary_max_bytes: int = SUMMARY_MAX_BYTES,
        executor: Executor | None = None,
        llm: LlmStage | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.llm = llm
        self.summary_max_bytes = summary_max_bytes
        self.preparer = RunPreparer(store)
        self.executor = executor or ThreadPoolExecutor(max_workers=16, thread_name_prefix="dsmo-processor")

    @activity.defn(name=PREPARE_RUN)
    @permanent_errors
    def prepare_run(self, request: PrepareRun) -> PreparedRun:
        """Write the run's input artifact and its version's config snapshot (both write-once)."""
        return self.preparer.prepare(request)

    @activity.defn(name=SUBJECT_KEY)
    @permanent_errors
    def subject_key(self, request: SubjectKeyRequest) -> SubjectKey:
        """The keys of a run's data subject, made now if the subject has none."""
        return self.store.subjects.key_for(request.subject)

    @activity.defn(name=RUN_STAGE)
    @permanent_errors
    async def run_stage(self, task: StageTask) -> StageSummary:
        """Run one attempt of a stage: input artifact in, output artifact (write-once) and summary out."""
        started = datetime.now(UTC)
        # An `llm` node's stage is DSMO's own, not a registered processor.
        processor = None if task.llm is not None else self.registry.get(task.agent, task.agent_version)
        version = processor.version if processor is not None else LLM_STAGE_VERSION
        info = activity.info()
        # The stage's span (Temporal's RunActivity span) carries the paper's message contract ids.
        trace.get_current_span().set_attributes(
            {
                "dsmo.run_id": task.run_id,
                "dsmo.stage": task.stage,
                "dsmo.workflow_version": task.workflow_version,
                "dsmo.agent": task.agent,
                "dsmo.agent_version": version,
                "dsmo.attempt": task.attempt,
                "dsmo.idempotency_key": task.idempotency_key,
            }
        )
        meter = activity.metric_meter()
        labels = {"agent": task.agent, "stage": task.stage}
        queued = (info.started_time - info.current_attempt_scheduled_time).total_seconds()
        meter.create_histogram_float("dsmo_stage_queue_seconds", "time a stage waited for a worker", "s").record(
            max(queued, 0.0), labels
        )
        try:
            if task.llm is None:
                return await self._run(task, processor, version, started)
            async with heartbeating():  # a model call: its worker's death is seen in seconds
                return await self._run(task, processor, version, started)
        finally:
            meter.create_histogram_float("dsmo_agent_processing_seconds", "time an agent took", "s").record(
                (datetime.now(UTC) - started).total_seconds(), {"agent": task.agent}
            )

    async def _io(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def _run(self, task: StageTask, processor: Processor | None, version: str, started: datetime) -> StageSummary:
        reuse = task.reuse_uri
        info = activity.info()
        if reuse is None and (task.attempt > 1 or info.attempt > 1):
            # Only a retry can find output an earlier execution committed without reporting it.
            reuse = await self._io(self._committed_output, task)
        if reuse is None and info.is_local and task.begun_mark != SKIP:
            # A local attempt may be run again: a worker that died before its workflow task
            # completed took the attempt's record with it (docs/reliability.md). Its output, if
            # written, is reused; begun and never finished, its worker died in it: a failed
            # attempt, so a stage that kills its workers ends in the dead letters instead of
            # looping. A `recheck` attempt may have run before without a mark: it looks either way.
            new_mark = await self._io(self._mark_begun, task)
            if not new_mark or task.begun_mark == RECHECK:
                reuse = await self._io(self._committed_output, task)
            if reuse is None and not new_mark:
                raise ApplicationError(
                    f"attempt {task.attempt}: its worker was lost before the run recorded it", type=WORKER_LOST
                )
        if reuse is not None:
            # Committed before (an attempt that wrote then failed to report, or a replay): never redo.
            return await self._io(self._report_existing, task, reuse, version, started)
        key = stage_output_key(task.workflow_version, task.run_id, task.stage_path, task.attempt)
        message = StageMessage(
            run_id=task.run_id,
            correlation_id=task.correlation_id,
            stage=task.stage,
            workflow_version=task.workflow_version,
            agent_version=version,
            artifact_in_uri=task.artifact_in_uri,
            artifact_out_uri=self.store.uri(key),
            idempotency_key=task.idempotency_key,
            attempt=task.attempt,
            created_at=task.created_at,
            config_ref=task.config_ref,
        )
        # What a plugin agent reports with `dsmo.progress` goes to the run's live stream (not a
        # sealed run's); an agent that reports nothing writes nothing.
        live = (
            ProgressLog(self.store, task_progress_folder(task), self._io, asyncio.get_running_loop())
            if (processor is not None and task.seal is None)
            else None
        )
        reset = CURRENT_PROGRESS.set(live)
        try:
            if processor is not None and not is_async_callable(processor.fn):
                # A plain processor's whole stage (its input read, its checks, the call, the commit)
                # takes one trip to the threads: each trip hands the GIL between the event loop and a
                # thread, and four of them per stage cost more on a busy worker than the work between.
                context = contextvars.copy_context()
                done = await self._io(context.run, self._plain_stage, task, processor, message, key)
                if isinstance(done, tuple):
                    stored, output = done
                else:  # the plain function handed back an awaitable: the loop finishes it
                    output = as_output(await done, agent=task.agent)
                    await self._io(processor.check_result, output)
                    stored = await self._io(self._commit, task, key, output, [])
                calls: dict[str, Any] = {}
            else:
                stored, output, calls = await self._loop_stage(task, processor, message, key)
        finally:
            CURRENT_PROGRESS.reset(reset)
            if live is not None:
                await live.close()
        if not stored.created:
            # Another execution of this attempt committed first (a reset, a duplicate task): its
            # output is the stage's output, and this one's is dropped.
            return await self._io(self._report_existing, task, stored.uri, version, started)
        return StageSummary(
            stage=task.stage,
            agent=task.agent,
            agent_version=version,
            attempt=task.attempt,
            artifact_out_uri=stored.uri,
            output_sha256=stored.sha256,
            output_bytes=stored.size,
            summary=output.summary,
            inference={**output.inference, **calls},
            reused=False,
            workflow_version=task.workflow_version,
            started_at=started,
            finished_at=datetime.now(UTC),
        )

    def _plain_stage(
        self, task: StageTask, processor: Processor, message: StageMessage, key: str
    ) -> tuple[StoredArtifact, ProcessorOutput] | Awaitable[Any]:
        """A plain (synchronous) processor's stage on one thread: input, checks, call, commit.

        A plain function may still return an awaitable; it is handed back for the loop to await.
        """
        document = stage_input(self._input_of(task))
        processor.check_input(document)
        result = processor.fn(document, message)
        if inspect.isawaitable(result):
            return result
        output = as_output(result, agent=task.agent)
        processor.check_result(output)
        return self._commit(task, key, output, []), output

    async def _loop_stage(
        self, task: StageTask, processor: Processor | None, message: StageMessage, key: str
    ) -> tuple[StoredArtifact, ProcessorOutput, dict[str, Any]]:
        """An `llm` stage or an async processor: awaited on the event loop, I/O on the threads."""
        raw = task.input_document if task.input_document is not None else await self._io(self._input_of, task)
        document = stage_input(raw)
        if processor is None:
            if self.llm is None:
                raise InvalidInput("llm stage: this worker runs no llm stages")
            attempt = await self.llm.run(task, document, self._io)
            output, calls, records = attempt.output, attempt.calls, [attempt.unwritten]
        else:
            calls, records = {}, []
            # Schemas are checked on the I/O threads, never on the event loop the worker's other
            # stages and calls share.
            await self._io(processor.check_input, document)
            result = await call_maybe_async(
                self.executor,
                processor.fn,
                document,
                message,
                who=("agent", processor.name, f"run {task.run_id}, stage {task.stage}"),
                blocking=processor.blocking,
            )
            output = as_output(result, agent=task.agent)
            await self._io(processor.check_result, output)
        return await self._io(self._commit, task, key, output, records), output, calls

    def _input_of(self, task: StageTask) -> Any:
        # A small run input comes with the task (the same document as the artifact); else read it.
        if task.input_document is not None:
            return task.input_document
        return self.store.read_json(task.artifact_in_uri, seal=task.seal)

    def _commit(
        self, task: StageTask, key: str, output: ProcessorOutput, records: list[tuple[str, dict[str, Any]]]
    ) -> StoredArtifact:
        """Write the records that go before the output, hold the output to the stage's limits, write it.

        One trip to the I/O threads per stage: when hundreds of model answers arrive together,
        each stage commits whole, in the order its answer came, instead of every call's record
        queueing ahead of the first output (with 200 answers at once, a stage's mean time from
        its answer to its completion fell from 0.60-0.70 s to 0.38-0.39 s).
        """
        for record_key, record in records:
            self.store.put_json_once(record_key, record, seal=task.seal)
        self._check(task, output)
        envelope = {
            "kind": STAGE_OUTPUT_KIND,
            "output": output.document,
            "summary": output.summary,
            "inference": output.inference,
        }
        return self.store.put_json_once(key, envelope, seal=task.seal)

    def _check(self, task: StageTask, output: ProcessorOutput) -> None:
        """The stage's own limits, beyond the processor's contract: the summary cap and the node's schema."""
        size = len(encode_json(output.summary))
        if size > self.summary_max_bytes:
            raise ContractViolation(
                f"agent {task.agent}: summary is {size} bytes, above the {self.summary_max_bytes}-byte cap; "
                "put large data in the output artifact"
            )
        check_output(task.output_schema, output.document, agent=task.agent)

    def _committed_output(self, task: StageTask) -> str | None:
        prefix = f"artifacts/{task.workflow_version}/{task.run_id}/{task.stage_path}/"
        found = sorted(
            (int(match.group(1)), uri)
            for uri in self.store.list_uris(prefix)
            if (match := _ATTEMPT.search(uri)) is not None
        )
        return found[0][1] if found else None

    def _mark_begun(self, task: StageTask) -> bool:
        """Mark a local attempt begun (one conditional PUT); False when a run of it did already."""
        output = stage_output_key(task.workflow_version, task.run_id, task.stage_path, task.attempt)
        return self.store.put_if_absent(output.rsplit("/", 1)[0] + f"/{BEGUN}", encode_json({"attempt": task.attempt}))

    def _report_existing(self, task: StageTask, uri: str, version: str, started: datetime) -> StageSummary:
        body = self.store.read_bytes(uri, seal=task.seal)
        try:
            stored = json.loads(body)
        except ValueError:
            raise ContractViolation(f"committed output {uri} is not JSON") from None
        match = _ATTEMPT.search(uri)
        return StageSummary(
            stage=task.stage,
            agent=task.agent,
            agent_version=version,
            attempt=int(match.group(1)) if match else task.attempt,
            artifact_out_uri=uri,
            output_sha256=hashlib.sha256(body).hexdigest(),
            output_bytes=len(body),
            summary=_field(stored, "summary"),
            inference=_field(stored, "inference"),
            reused=True,
            workflow_version=task.workflow_version,
            started_at=started,
            finished_at=datetime.now(UTC),
        )

    @activity.defn(name=WRITE_DEAD_LETTER)
    def write_dead_letter(self, letter: DeadLetter) -> str:
        """`dlq/{run_id}/{stage}.json`, write-once (a retried activity keeps the first)."""
        document = letter.model_dump(mode="json", exclude={"seal"})
        return self.store.put_json_once(f"dlq/{letter.run_id}/{letter.stage}.json", document, seal=letter.seal).uri


def stage_input(document: Any) -> Any:
    """A stage reads the previous stage's output document, not its envelope."""
    if isinstance(document, dict) and document.get("kind") == STAGE_OUTPUT_KIND:
        return document.get("output")
    return document


def _field(document: Any, name: str) -> dict[str, Any]:
    value = document.get(name) if isinstance(document, dict) else None
    return value if isinstance(value, dict) else {}
