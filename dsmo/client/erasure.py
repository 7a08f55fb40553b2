"""Erasing a data subject: cancel or refuse its open runs, destroy its key, delete its histories, log it.

Crypto-shredding, then deleting what is not sealed: the subject's sealed artifacts (inputs,
outputs, model call records, dead letters, large event values) stay in the bucket and become
unreadable by anyone once the key is destroyed, wherever copies of them went. The runs' exported
audit trails stay and still verify: they record the subject by its keyed fingerprint and
sensitive values as keyed fingerprints.

Runs are judged by their current execution (`run_selection`); their histories, every generation
and helper workflow, are deleted until Temporal serves them no more (`history_deletion`); the file
channel's messages of the runs (``{outbox}/{run}/``) are removed.

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
from typing import Any

from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from dsmo.activities.erasure_log import ErasureLog
from dsmo.activities.messaging import remove_outbox_messages
from dsmo.activities.run_generations import generations
from dsmo.client import run_requests
from dsmo.client.client_errors import RunClosed
from dsmo.client.core import ClientCore
from dsmo.client.history_deletion import (
    Execution,
    compensation_retries,
    delete_execution,
    retried_by,
    until_gone,
)
from dsmo.client.status_views import closed_record
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.subjects import queryable

# How long erasing waits for the runs it cancelled to end (their compensations run first).
CANCEL_WAIT_SECONDS = 300.0
TERMINAL = {status.value for status in RunStatus if status.terminal}


class SubjectHasOpenRuns(DsmoError):
    """The subject has runs that have not ended, and erasing was not told to cancel them."""

    code = "subject_has_open_runs"


@dataclass(frozen=True)
class SubjectRun:
    """One run of a subject: found by visibility, judged by its current execution.

    Attributes:
        run_id: The run (workflow id).
        executions: Its Temporal executions (one per continue-as-new generation), newest first.
        open: It has not ended (Temporal's own word, not visibility's).
        status: DSMO's status of the run (``AgentExecutionStatus`` of its current execution).
        agent: The run's agent.
        helpers: Ended helper workflows it left (a compensation's durable retry), as
            ``(workflow id, execution)``: their histories hold the step's output.
        retrying: Helper workflows still running (a compensation still being retried).
    """

    run_id: str
    executions: list[str]
    open: bool
    status: str
    agent: str
    helpers: list[Execution] = field(default_factory=list)
    retrying: list[str] = field(default_factory=list)


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
        histories_deleted: Temporal executions deleted: Temporal no longer serves their history.
        histories_pending: Executions (``run_id/execution``) whose deletion Temporal accepted but
            that it still served `HISTORY_GONE_SECONDS` later; erasing again checks them.
        messages_removed: Runs whose messages were removed from the file channel's outbox.
        record: The erasure log's new record (None for a dry run).
    """

    plan: ErasurePlan
    dry_run: bool
    cancelled: list[str] = field(default_factory=list)
    histories_deleted: int = 0
    histories_pending: list[str] = field(default_factory=list)
    messages_removed: int = 0
    record: dict[str, Any] | None = None


async def plan_erasure(core: ClientCore, subject: str) -> ErasurePlan:
    """The subject's runs (every status) and whether it has a key.

    Raises:
        DsmoError: ``subject`` is empty or holds a quote, backslash or control character.
    """
    if not queryable(subject):
        raise DsmoError("subject: give the subject's id (no quotes, backslashes or control characters)")
    store = core.artifacts
    fingerprint = store.subjects.fingerprint(subject)
    found: dict[str, list[str]] = {}  # run -> every execution visibility lists of it
    async for execution in core.temporal.list_workflows(f"{sa.DATA_SUBJECT.name}='{subject}'"):
        found.setdefault(execution.id, []).append(execution.run_id)
    runs = [run for run_id, executions in sorted(found.items()) if (run := await _judged(core, run_id, executions))]
    key_exists = await asyncio.to_thread(store.subjects.record, fingerprint) is not None
    return ErasurePlan(fingerprint, runs, key_exists)


async def erase_subject(
    core: ClientCore, subject: str, *, reason: str, by: str, cancel_runs: bool = False, dry_run: bool = False
) -> ErasureReport:
    """Erase everything DSMO keeps of ``subject`` that can identify them; see the module docstring.

    Raises:
        DsmoError: ``reason`` is empty, or ``subject`` is not a subject id.
        SubjectHasOpenRuns: Runs of the subject have not ended and ``cancel_runs`` is off.
        DsmoError: A cancelled run did not end in time (nothing was destroyed; run it again).
    """
    if not reason.strip():
        raise DsmoError("reason: say why the subject is erased (it is kept in the erasure log)")
    plan = await plan_erasure(core, subject)
    if dry_run:
        return ErasureReport(plan, dry_run=True)
    if plan.open_runs and not cancel_runs:
        raise SubjectHasOpenRuns(
            f"subject has {len(plan.open_runs)} open run(s) ({', '.join(plan.open_runs[:5])}); "
            "end them, or erase with --cancel-runs"
        )
    await _cancel(core, plan.open_runs, reason, by)
    store = core.artifacts
    cancelled, destroyed = list(plan.open_runs), []
    for _ in range(5):
        key = await asyncio.to_thread(store.subjects.record, plan.fingerprint)
        if key is not None and await asyncio.to_thread(store.subjects.destroy, plan.fingerprint):
            destroyed.append(str(key["keyId"]))
        ended = await plan_erasure(core, subject)
        if not ended.open_runs:
            break
        # Started while this erasure ran: sealed with the key just destroyed, or with a new one.
        if not cancel_runs:
            raise SubjectHasOpenRuns(
                f"runs of the subject started while it was erased ({', '.join(ended.open_runs[:5])}); "
                "stop what starts them, and erase again with --cancel-runs"
            )
        await _cancel(core, ended.open_runs, reason, by)
        cancelled += ended.open_runs
    else:
        raise DsmoError("runs of the subject keep starting while it is erased; stop what starts them, and erase again")
    requested: list[Execution] = []
    # Every run has ended (no running execution is ever deleted), and so has every helper listed.
    for execution in [(run.run_id, each) for run in ended.runs for each in run.executions] + [
        helper for run in ended.runs for helper in run.helpers
    ]:
        if await delete_execution(core.temporal, execution):
            requested.append(execution)
    # Temporal deletes in the background and serves the history meanwhile: wait until it is gone.
    pending = await until_gone(core.temporal, requested)
    deleted = len(requested) - len(pending)
    # A compensation still retrying is left to finish its work; erasing again deletes it after.
    retrying = [f"{helper} (still retrying)" for run in ended.runs for helper in run.retrying]
    outbox = core.settings.outbox_dir
    removed = await asyncio.to_thread(remove_outbox_messages, outbox, [run.run_id for run in ended.runs])
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
    return ErasureReport(
        plan,
        dry_run=False,
        cancelled=cancelled,
        histories_deleted=deleted,
        histories_pending=[f"{run_id}/{execution}" for run_id, execution in pending] + retrying,
        messages_removed=removed,
        record=appended,
    )


async def _cancel(core: ClientCore, run_ids: list[str], reason: str, by: str) -> None:
    """Cancel these runs (their sagas compensate) and wait until each has ended."""
    for run_id in run_ids:
        with contextlib.suppress(RunClosed):  # it ended meanwhile
            await run_requests.cancel(core, run_id, reason=f"data subject erased: {reason}", by=by)
    await _until_ended(core, run_ids)


async def _judged(core: ClientCore, run_id: str, executions: list[str]) -> SubjectRun | None:
    """The run as it is now (`run_selection`'s rule): its current execution says whether it is open
    and its status, and its generations are walked back from it (Temporal's record: one that
    visibility has not indexed yet is deleted too)."""
    try:
        current = await core.temporal.get_workflow_handle(run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:  # deleted by an earlier erasure
            return None
        raise
    attributes = current.typed_search_attributes
    status = attributes.get(sa.AGENT_EXECUTION_STATUS) or (current.status.name.lower() if current.status else "")
    is_open = current.status is WorkflowExecutionStatus.RUNNING
    if is_open:  # a run that recorded its end is writing its trail's export: give it a moment to close
        is_open = await _still_open(core, run_id, ending=status in TERMINAL)
    record = None if is_open else await closed_record(core.temporal, run_id)
    helpers, retrying = await compensation_retries(core.temporal, run_id, retried_by(record))
    walked = await generations(core.temporal, run_id, current.run_id)
    return SubjectRun(
        run_id,
        [*walked, *(each for each in executions if each not in walked)],
        is_open,
        status,
        attributes.get(sa.AGENT_NAME) or "",
        helpers,
        retrying,
    )


async def _still_open(core: ClientCore, run_id: str, *, ending: bool) -> bool:
    """Whether the run has not ended; one whose status is already terminal is given a moment to close."""
    handle = core.temporal.get_workflow_handle(run_id)
    for _ in range(60 if ending else 1):  # a hang guard: it is writing its trail's export, then closes
        if (await handle.describe()).status is not WorkflowExecutionStatus.RUNNING:
            return False
        if ending:
            await asyncio.sleep(0.5)
    return True


async def _until_ended(core: ClientCore, run_ids: list[str]) -> None:
    deadline = time.monotonic() + CANCEL_WAIT_SECONDS
    for run_id in run_ids:
        handle = core.temporal.get_workflow_handle(run_id)
        while (await handle.describe()).status is WorkflowExecutionStatus.RUNNING:
            if time.monotonic() > deadline:
                raise DsmoError(
                    f"run {run_id} has not ended {CANCEL_WAIT_SECONDS:.0f}s after it was cancelled "
                    "(its compensations may still be running); nothing was erased, run the erasure again"
                )
            await asyncio.sleep(0.5)
