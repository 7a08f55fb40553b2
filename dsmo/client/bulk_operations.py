"""Bulk cancel, redrive and deliver by visibility filter, each run through DSMO's own single-run
path (`DsmoClient.cancel`, `redrive`, `deliver_event`), paced and reported by `batches.run_batch`.

Each is idempotent: a run it already acted on is ``skipped`` when the same batch runs again, so
an interrupted batch is finished by running it again.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from temporalio.client import WorkflowExecutionDescription
from temporalio.service import RPCError

from dsmo.client import redrive, run_requests, run_trails
from dsmo.client.batches import BatchReport, RunOutcome, run_batch
from dsmo.client.client_errors import EventNotAccepted, RunClosed
from dsmo.client.core import ClientCore
from dsmo.client.event_checks import check_event
from dsmo.client.rpc_errors import rpc_error
from dsmo.client.run_selection import Scope
from dsmo.workflows.common.identifiers import MAX_EVENT_ID

FAILED_RUNS = "AgentExecutionStatus='failed'"
# Trail records that say a run took an event (applied it, or kept it for a wait ahead); a
# DUPLICATE_IGNORED record names the id too, but is not the run taking it.
NOT_TAKING = {"DUPLICATE_IGNORED"}
OnOutcome = Callable[[RunOutcome], None]


async def bulk_cancel(
    core: ClientCore,
    query: str,
    *,
    reason: str,
    by: str = "user",
    dry_run: bool = False,
    rate: float | None = None,
    limit: int | None = None,
    on_outcome: OnOutcome | None = None,
    runs: Scope = Scope.ANY,
) -> BatchReport:
    """Cancel every run ``query`` selects (of ``runs``: `Scope.OPEN` leaves ended ones out of the
    batch, instead of reporting each as skipped), as `DsmoClient.cancel` does one (see there)."""
    run_requests.required_reason(reason, "the runs are cancelled")

    async def cancel(run_id: str) -> RunOutcome:
        described = await _describe(core, run_id)
        if described.close_time is not None:
            return RunOutcome(run_id, "skipped", "already ended")
        if described.raw_description.workflow_extended_info.cancel_requested:
            # Asked before (this batch, interrupted, or another): the run is unwinding or will
            # when a worker runs it; asking again would add nothing.
            return RunOutcome(run_id, "skipped", "cancel already requested")
        if dry_run:
            return RunOutcome(run_id, "would")
        try:
            await run_requests.cancel(core, run_id, reason=reason, by=by)
        except RunClosed:
            return RunOutcome(run_id, "skipped", "already ended")
        return RunOutcome(run_id, "done", "cancel requested", {"cancelledBy": by, "cancelReason": reason})

    return await run_batch(
        core, "cancel", query, cancel, dry_run=dry_run, rate=rate, limit=limit, on_outcome=on_outcome, runs=runs
    )


async def bulk_redrive(
    core: ClientCore,
    query: str,
    *,
    dry_run: bool = False,
    rate: float | None = None,
    limit: int | None = None,
    on_outcome: OnOutcome | None = None,
) -> BatchReport:
    """Redrive the dead letters of every failed run ``query`` selects (see `DsmoClient.redrive`)."""

    async def redrive_run(run_id: str) -> RunOutcome:
        letters = await redrive.dead_letters(core, run_id=run_id)
        if not letters:
            return RunOutcome(run_id, "skipped", "no dead letter")
        pending = [row.id for row in letters if row.redriven_as is None]
        if not pending:
            redriven = [str(row.redriven_as) for row in letters]
            return RunOutcome(run_id, "skipped", f"already redriven as {', '.join(redriven)}", {"redrivenAs": redriven})
        if dry_run:
            return RunOutcome(run_id, "would", ", ".join(pending), {"deadLetters": pending})
        # One id per letter: a batch interrupted between starting a redrive and marking its
        # letter finds that run when it runs again, instead of starting a second one.
        started = [
            await redrive.redrive(core, core.artifacts, letter_id, new_id=redrive_id(letter_id))
            for letter_id in pending
        ]
        return RunOutcome(run_id, "done", f"as {', '.join(started)}", {"deadLetters": pending, "redrivenAs": started})

    return await run_batch(
        core,
        "redrive",
        query,
        redrive_run,
        dry_run=dry_run,
        rate=rate,
        limit=limit,
        on_outcome=on_outcome,
        scope=FAILED_RUNS,
        runs=Scope.ENDED,
    )


async def bulk_deliver(
    core: ClientCore,
    query: str,
    event_type: str,
    data: dict[str, Any],
    *,
    batch_id: str,
    dry_run: bool = False,
    rate: float | None = None,
    limit: int | None = None,
    on_outcome: OnOutcome | None = None,
) -> BatchReport:
    """Deliver one resume event to every run ``query`` selects (see `DsmoClient.bulk_deliver`).

    Raises:
        EventMalformed: The event is not well formed; nothing was sent to any run.
        ValueError: ``batch_id`` is empty.
    """
    if not batch_id.strip():
        raise ValueError("batch_id: must not be empty")
    check_event(event_type, batch_event_id(batch_id, "x"), data)  # one malformed event refuses the batch

    async def deliver(run_id: str) -> RunOutcome:
        event_id = batch_event_id(batch_id, run_id)
        detail = {"eventId": event_id}
        if await _ended(core, run_id):
            # An ended run takes nothing; if it took this event before it ended, that was this batch.
            taken = await _took(core, run_id, event_id)
            return RunOutcome(run_id, "skipped", "already delivered" if taken else "already ended", detail)
        if await _took(core, run_id, event_id):
            # Sent again, the run would record DUPLICATE_IGNORED: ask its trail first, write nothing.
            return RunOutcome(run_id, "skipped", "already delivered", detail)
        if dry_run:
            return RunOutcome(run_id, "would", None, detail)
        try:
            ack = await run_requests.deliver_event(core, run_id, event_type, data, event_id=event_id)
        except RunClosed:
            return RunOutcome(run_id, "skipped", "already ended", detail)
        except EventNotAccepted as err:
            return RunOutcome(
                run_id, "refused", refusal(str(err).removeprefix(f"{event_type} rejected: "), run_id), detail
            )
        if ack.duplicate:
            return RunOutcome(run_id, "skipped", "already delivered", detail)
        what = "kept for a wait ahead" if ack.buffered else "taken"
        return RunOutcome(run_id, "done", what, {**detail, "buffered": ack.buffered, "status": ack.status})

    return await run_batch(
        core, "deliver", query, deliver, dry_run=dry_run, rate=rate, limit=limit, on_outcome=on_outcome
    )


def redrive_id(letter_id: str) -> str:
    """The run id a bulk redrive gives the redrive of ``RUN/STAGE``: ``RUN.redrive-<hash of the letter>``."""
    run_id = letter_id.split("/", 1)[0]
    return f"{run_id}.redrive-{hashlib.sha256(letter_id.encode()).hexdigest()[:8]}"


def refusal(text: str, run_id: str) -> str:
    """A run's refusal with what it was doing first, so refusals group by it (`reason_class`):
    ``run R is waiting for response and no wait ahead takes ...`` -> ``waiting for response: no
    wait ahead takes ...``; other refusals already name their field first and are kept."""
    found = re.fullmatch(rf"run {re.escape(run_id)} is (.+?) and (no wait ahead .*)", text, re.DOTALL)
    return f"{found[1]}: {found[2]}" if found else text


def batch_event_id(batch_id: str, run_id: str) -> str:
    """The event id a batch gives the event it delivers to one run: ``BATCH:RUN``, or a hash of
    both when that is longer than an event id may be (the same batch and run, the same id)."""
    joined = f"{batch_id}:{run_id}"
    if len(joined) <= MAX_EVENT_ID:
        return joined
    return "batch:" + hashlib.sha256(f"{batch_id}\n{run_id}".encode()).hexdigest()


def default_batch_id(event_type: str, data: dict[str, Any], query: str) -> str:
    """The batch id of a delivery given none: a hash of the event and the filter, so the same
    command run again is the same batch (and deduplicated)."""
    canonical = json.dumps([event_type, data, query], sort_keys=True, ensure_ascii=False)
    return "bulk-" + hashlib.sha256(canonical.encode()).hexdigest()[:16]


async def _describe(core: ClientCore, run_id: str) -> WorkflowExecutionDescription:
    """The run as Temporal describes it (no worker needed), or the client's error for why not."""
    try:
        return await core.temporal.get_workflow_handle(run_id).describe()
    except RPCError as err:
        raise rpc_error(core.settings, run_id, err) from None


async def _ended(core: ClientCore, run_id: str) -> bool:
    """Has the run ended? From Temporal's description: no worker needed."""
    return (await _describe(core, run_id)).close_time is not None


async def _took(core: ClientCore, run_id: str, event_id: str) -> bool:
    """Did the run take the event with this id (its trail names it)?"""
    events = await run_trails.events(core, run_id)
    return any(e.data.get("eventId") == event_id and e.type not in NOT_TAKING for e in events)
