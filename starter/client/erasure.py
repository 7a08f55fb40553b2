"""Erasing a data subject: cancel or refuse its open runs, destroy its key, delete its histories, log it.

Crypto-shredding: the subject's sealed artifacts (inputs, outputs, model call records, dead
letters, large event values) stay in the bucket and become unreadable by anyone once the key is
destroyed, wherever copies of them went. The runs' exported audit trails stay and still verify:
they record the subject by its keyed fingerprint and sensitive values as keyed fingerprints.

The steps run in an order that a command killed halfway can simply be run again: nothing is
destroyed until every open run has ended, each later step is idempotent, and the erasure log's
record is written last (it lists the keys this run of the command destroyed). A run of the
subject started while the erasure runs is cancelled too (with ``cancel_runs``), and its key
destroyed; no running execution is ever deleted. Stop what starts runs of the subject first:
visibility may list a run that just started a moment late.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from dsmo.activities.erasure_log import ErasureLog
from dsmo.starter.client.client_errors import RunClosed
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.subjects import queryable

if TYPE_CHECKING:
    from dsmo.starter.client.dsmo_client import DsmoClient

# How long erasing waits for the runs it cancelled to end (their compensations run first).
CANCEL_WAIT_SECONDS = 300.0
TERMINAL = {status.value for status in RunStatus if status.terminal}


class SubjectHasOpenRuns(DsmoError):
    """The subject has runs that have not ended, and erasing was not told to cancel them."""

    code = "subject_has_open_runs"


@dataclass(frozen=True)
class SubjectRun:
    """One run of a subject, as visibility lists it.

    Attributes:
        run_id: The run (workflow id).
        executions: Its Temporal executions (one per continue-as-new generation), newest first.
        open: It has not ended.
        status: DSMO's status of the run (``AgentExecutionStatus``).
        agent: The run's agent.
    """

    run_id: str
    executions: list[str]
    open: bool
    status: str
    agent: str


@dataclass(frozen=True)
class ErasurePlan:
    """What erasing a subject would touch.

    Attributes:
        fingerprint: The subject's keyed fingerprint (how the trail and the erasure log name it).
        runs: Its runs, every status.
        key_exists: The subject still has a key (False: erased before, or no run ever sealed anything).
    """

    fingerprint: str
    runs: list[SubjectRun]
    key_exists: bool

    @property
    def open_runs(self) -> list[str]:
        return [run.run_id for run in self.runs if run.open]


@dataclass(frozen=True)
class ErasureReport:
    """What erasing a subject did (or, for a dry run, would do).

    Attributes:
        plan: The subject's runs and key as found.
        dry_run: Nothing was changed.
        cancelled: Open runs cancelled (and compensated) first.
        histories_deleted: Temporal executions deleted.
        record: The erasure log's new record (None for a dry run).
    """

    plan: ErasurePlan
    dry_run: bool
    cancelled: list[str] = field(default_factory=list)
    histories_deleted: int = 0
    record: dict[str, Any] | None = None


async def plan_erasure(dsmo: DsmoClient, subject: str) -> ErasurePlan:
    """The subject's runs (every status) and whether it has a key.

    Raises:
        DsmoError: ``subject`` is empty or holds a quote, backslash or control character.
    """
    if not queryable(subject):
        raise DsmoError("subject: give the subject's id (no quotes, backslashes or control characters)")
    store = dsmo.artifacts
    fingerprint = store.subjects.fingerprint(subject)
    found: dict[str, dict[str, Any]] = {}
    async for execution in dsmo.temporal.list_workflows(f"{sa.DATA_SUBJECT.name}='{subject}'"):
        entry = found.setdefault(execution.id, {"executions": [], "open": False, "status": "", "agent": ""})
        entry["executions"].append(execution.run_id)
        if execution.status is WorkflowExecutionStatus.RUNNING:
            entry["open"] = True
        if not entry["status"] or execution.status is WorkflowExecutionStatus.RUNNING:
            attributes = execution.typed_search_attributes
            temporal_status = execution.status.name.lower() if execution.status else "unknown"
            entry["status"] = attributes.get(sa.AGENT_EXECUTION_STATUS) or temporal_status
            entry["agent"] = attributes.get(sa.AGENT_NAME) or ""
    for run_id, entry in found.items():
        if entry["open"]:  # visibility lags a run's end by a moment: ask Temporal itself
            entry["open"] = await _still_open(dsmo, run_id, ending=entry["status"] in TERMINAL)
    runs = [SubjectRun(run_id, **entry) for run_id, entry in sorted(found.items())]
    key_exists = await asyncio.to_thread(store.subjects.record, fingerprint) is not None
    return ErasurePlan(fingerprint, runs, key_exists)


async def erase_subject(
    dsmo: DsmoClient, subject: str, *, reason: str, by: str, cancel_runs: bool = False, dry_run: bool = False
) -> ErasureReport:
    """Erase everything DSMO keeps of ``subject`` that can identify them; see the module docstring.

    Raises:
        DsmoError: ``reason`` is empty, or ``subject`` is not a subject id.
        SubjectHasOpenRuns: Runs of the subject have not ended and ``cancel_runs`` is off.
        DsmoError: A cancelled run did not end in time (nothing was destroyed; run it again).
    """
    if not reason.strip():
        raise DsmoError("reason: say why the subject is erased (it is kept in the erasure log)")
    plan = await plan_erasure(dsmo, subject)
    if dry_run:
        return ErasureReport(plan, dry_run=True)
    if plan.open_runs and not cancel_runs:
        raise SubjectHasOpenRuns(
            f"subject has {len(plan.open_runs)} open run(s) ({', '.join(plan.open_runs[:5])}); "
            "end them, or erase with --cancel-runs"
        )
    await _cancel(dsmo, plan.open_runs, reason, by)
    store = dsmo.artifacts
    cancelled, destroyed = list(plan.open_runs), []
    for _ in range(5):
        key = await asyncio.to_thread(store.subjects.record, plan.fingerprint)
        if key is not None and await asyncio.to_thread(store.subjects.destroy, plan.fingerprint):
            destroyed.append(str(key["keyId"]))
        ended = await plan_erasure(dsmo, subject)
        if not ended.open_runs:
            break
        # Started while this erasure ran: sealed with the key just destroyed, or with a new one.
        if not cancel_runs:
            raise SubjectHasOpenRuns(
                f"runs of the subject started while it was erased ({', '.join(ended.open_runs[:5])}); "
                "stop what starts them, and erase again with --cancel-runs"
            )
        await _cancel(dsmo, ended.open_runs, reason, by)
        cancelled += ended.open_runs
    else:
        raise DsmoError("runs of the subject keep starting while it is erased; stop what starts them, and erase again")
    deleted = 0
    for run in ended.runs:  # every one has ended: no running execution is ever deleted
        for execution in run.executions:
            deleted += await _delete_history(dsmo, run.run_id, execution)
    record = {
        "type": "SUBJECT_ERASED",
        "subject": plan.fingerprint,
        "at": datetime.now(UTC).isoformat(),
        "by": by,
        "reason": reason,
        "runs": sorted({run.run_id for run in [*plan.runs, *ended.runs]}),
        "cancelled": cancelled,
        # The keys this erasure destroyed (none: an earlier, interrupted erasure had destroyed them).
        "keysDestroyed": destroyed,
    }
    appended = await asyncio.to_thread(ErasureLog(store).append, record)
    return ErasureReport(plan, dry_run=False, cancelled=cancelled, histories_deleted=deleted, record=appended)


async def _cancel(dsmo: DsmoClient, run_ids: list[str], reason: str, by: str) -> None:
    """Cancel these runs (their sagas compensate) and wait until each has ended."""
    for run_id in run_ids:
        with contextlib.suppress(RunClosed):  # it ended meanwhile
            await dsmo.cancel(run_id, reason=f"data subject erased: {reason}", by=by)
    await _until_ended(dsmo, run_ids)


async def _still_open(dsmo: DsmoClient, run_id: str, *, ending: bool) -> bool:
    """Whether the run has not ended; one whose status is already terminal is given a moment to close."""
    handle = dsmo.temporal.get_workflow_handle(run_id)
    for _ in range(60 if ending else 1):  # a hang guard: it is writing its trail's export, then closes
        if (await handle.describe()).status is not WorkflowExecutionStatus.RUNNING:
            return False
        if ending:
            await asyncio.sleep(0.5)
    return True


async def _until_ended(dsmo: DsmoClient, run_ids: list[str]) -> None:
    deadline = time.monotonic() + CANCEL_WAIT_SECONDS
    for run_id in run_ids:
        handle = dsmo.temporal.get_workflow_handle(run_id)
        while (await handle.describe()).status is WorkflowExecutionStatus.RUNNING:
            if time.monotonic() > deadline:
                raise DsmoError(
                    f"run {run_id} has not ended {CANCEL_WAIT_SECONDS:.0f}s after it was cancelled "
                    "(its compensations may still be running); nothing was erased, run the erasure again"
                )
            await asyncio.sleep(0.5)


async def _delete_history(dsmo: DsmoClient, run_id: str, execution: str) -> int:
    request = DeleteWorkflowExecutionRequest(
        namespace=dsmo.settings.temporal.namespace,
        workflow_execution=WorkflowExecution(workflow_id=run_id, run_id=execution),
    )
    try:
        await dsmo.temporal.workflow_service.delete_workflow_execution(request)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return 0  # deleted by an earlier erasure that stopped halfway
        raise
    return 1
