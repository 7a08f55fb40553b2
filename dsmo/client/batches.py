"""The batch runner: apply one per-run operation to every run a visibility filter selects, paced
and bounded, and report what became of each run.

Bulk cancel, redrive and deliver (`bulk_operations`), run migration and what-if use it. Runs are
selected by DSMO's one rule (`run_selection`: each run once, judged by its current execution), read
from Temporal visibility page by page while earlier ones are worked on, so a batch of any size
holds only the runs in flight, the outcomes and the ids already seen. A per-run error is that run's ``failed``
outcome; it never stops the batch.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from dsmo.client.connection import first_line
from dsmo.client.core import ClientCore
from dsmo.client.query_errors import given_query
from dsmo.client.run_selection import Scope, Selection, VisibilityBehind, count_current, selected
from dsmo.workflows.common.errors import DsmoError

Outcome = Literal["done", "would", "skipped", "refused", "failed"]
OUTCOMES: tuple[Outcome, ...] = ("done", "would", "skipped", "refused", "failed")


@dataclass(frozen=True)
class RunOutcome:
    """What a batch did to one run.

    Attributes:
        run_id: The run.
        outcome: ``done`` (acted), ``would`` (dry run: would act), ``skipped`` (nothing to do,
            for example already done by an earlier run of the batch), ``refused`` (DSMO refused
            it: ``reason`` says why) or ``failed`` (an error: ``reason`` names it).
        reason: One line: the refusal, the error, or why it was skipped.
        detail: What the operation adds (for example the run a dead letter was redriven as).
    """

    run_id: str
    outcome: Outcome
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def reason_class(reason: str | None) -> str:
    """The group a refusal is counted under: its text before the first ":" (the whole text if none).

    Refusals name their subject first (``node review: ...``, ``not waiting for ...: ...``), so
    runs refused for the same cause are counted together while their own details differ.
    """
    return (reason or "").split(":", 1)[0].strip() or "unknown"


@dataclass
class BatchReport:
    """What a batch did: the operation, the filter, and one outcome per run (in completion order).

    Attributes:
        operation: The operation's name (``cancel``, ``redrive``, ``deliver``, ``migrate``).
        query: The visibility filter the runs were selected by, as given.
        dry_run: True when nothing was sent.
        started_at: When the batch started.
        finished_at: When it finished (None while it runs).
        outcomes: One per run handled.
    """

    operation: str
    query: str
    dry_run: bool
    started_at: datetime
    finished_at: datetime | None = None
    outcomes: list[RunOutcome] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Counts per outcome, refusals per reason class (see `reason_class`), and the total.

        Returns:
            ``{"done", "would", "skipped", "refused", "failed": n, "refusedByReason": {class: n}, "total": n}``.
        """
        counts: dict[str, Any] = dict.fromkeys(OUTCOMES, 0)
        counts.update(Counter(o.outcome for o in self.outcomes))
        counts["refusedByReason"] = dict(
            Counter(reason_class(o.reason) for o in self.outcomes if o.outcome == "refused")
        )
        counts["total"] = len(self.outcomes)
        return counts

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-ready data, with its summary and every run's outcome.

        Returns:
            ``{"operation", "query", "dryRun", "startedAt", "finishedAt", "summary", "runs": [{"runId",
            "outcome", "reason", "detail"}]}`` (times in ISO 8601).
        """
        return {
            "operation": self.operation,
            "query": self.query,
            "dryRun": self.dry_run,
            "startedAt": self.started_at.isoformat(),
            "finishedAt": self.finished_at.isoformat() if self.finished_at else None,
            "summary": self.summary(),
            "runs": [
                {"runId": o.run_id, "outcome": o.outcome, "reason": o.reason, "detail": o.detail} for o in self.outcomes
            ],
        }


class Pacer:
    """Lets at most ``rate`` runs start per second: each start waits for the slot 1/rate after the
    previous one (a token bucket holding one token, so a pause never turns into a burst).

    ``clock`` and ``sleep`` are injectable so tests check the pacing without waiting.
    """

    def __init__(
        self,
        rate: float | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        if rate is not None and rate <= 0:
            raise ValueError("rate: must be more than 0 runs per second")
        self.interval = 1.0 / rate if rate else 0.0
        self.clock = clock
        self.sleep = sleep
        self.next_slot: float | None = None

    async def wait(self) -> None:
        """Return when the next run may start."""
        if not self.interval:
            return
        now = self.clock()
        slot = now if self.next_slot is None else max(now, self.next_slot)
        self.next_slot = slot + self.interval
        if slot > now:
            await self.sleep(slot - now)


async def selected_runs(
    core: ClientCore,
    query: str,
    *,
    scope: str | None = None,
    runs: Scope = Scope.ANY,
    limit: int | None = None,
    on_behind: Callable[[str, VisibilityBehind], Awaitable[None]] | None = None,
) -> AsyncIterator[str]:
    """The ids of the runs ``query`` selects among AgentExecution runs, each once, by its current
    execution (see `run_selection`), read page by page.

    Raises:
        InvalidQuery: Temporal refused the filter (``query: <why>``, placed in ``query``).
        TemporalUnavailable: Temporal cannot be reached.
    """
    selection = Selection(query, scope, runs)
    async for execution in selected(core.temporal, selection, limit=limit, on_behind=on_behind):
        yield execution.id


async def count_runs(core: ClientCore, query: str, *, scope: str | None = None, runs: Scope = Scope.ANY) -> int | None:
    """How many runs the filter selects now (for a progress bar); None if Temporal cannot count."""
    try:
        return await count_current(core.temporal, Selection(query, scope, runs))
    except DsmoError:
        return None


async def run_batch(
    core: ClientCore,
    operation: str,
    query: str,
    per_run: Callable[[str], Awaitable[RunOutcome]],
    *,
    dry_run: bool = False,
    rate: float | None = None,
    limit: int | None = None,
    concurrency: int = 20,
    on_outcome: Callable[[RunOutcome], None] | None = None,
    scope: str | None = None,
    runs: Scope = Scope.ANY,
    pacer: Pacer | None = None,
) -> BatchReport:
    """Call ``per_run`` for every AgentExecution run ``query`` selects, and report the outcomes.

    Args:
        client: The client whose Temporal lists the runs.
        operation: The operation's name, for the report.
        query: A Temporal visibility filter (AND-ed with ``WorkflowType='AgentExecution'``).
        per_run: What to do with one run id; it honours the dry run itself. An exception it
            raises becomes the run's ``failed`` outcome (first line of the error).
        dry_run: Recorded in the report (``per_run`` is the one that sends nothing).
        rate: At most this many runs started per second (default: no pacing).
        limit: At most this many runs.
        concurrency: At most this many runs in flight at once.
        on_outcome: Called with each outcome as it is known (progress, per-run lines).
        scope: A clause the operation adds to the selection (for example only failed runs);
            kept out of the report's query.
        runs: Open runs, ended runs or any (by each run's current execution).
        pacer: Paces the starts (default: a `Pacer` for ``rate``); tests inject one.

    Returns:
        The report, with ``finished_at`` set.

    Raises:
        InvalidQuery: ``query`` is empty (``--query: ...``), or Temporal refused it (``query: <why>``),
            before any run was touched.
        TemporalUnavailable: Temporal cannot be reached.
        ValueError: ``rate``, ``limit`` or ``concurrency`` is not positive.
    """
    given_query(query)
    if limit is not None and limit < 1:
        raise ValueError("limit: must be at least 1")
    if concurrency < 1:
        raise ValueError("concurrency: must be at least 1")
    pacer = pacer or Pacer(rate)
    report = BatchReport(operation=operation, query=query, dry_run=dry_run, started_at=datetime.now(UTC))
    slots = asyncio.Semaphore(concurrency)
    in_flight: set[asyncio.Task[None]] = set()

    async def one(run_id: str) -> None:
        try:
            outcome = await per_run(run_id)
        except Exception as err:  # noqa: BLE001 - one run's error is its outcome, never the batch's end
            outcome = RunOutcome(run_id, "failed", _one_line(err))
        finally:
            slots.release()
        report.outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)

    async def behind(run_id: str, err: VisibilityBehind) -> None:
        outcome = RunOutcome(run_id, "failed", str(err))
        report.outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)

    try:
        started = 0
        async for run_id in selected_runs(core, query, scope=scope, runs=runs, limit=limit, on_behind=behind):
            await slots.acquire()
            await pacer.wait()
            task = asyncio.create_task(one(run_id))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            started += 1
            if limit is not None and started >= limit:
                break  # before the listing reads another page
        if in_flight:
            await asyncio.gather(*in_flight)
    finally:
        for task in in_flight:  # interrupted: the runs not answered yet are left as they are
            task.cancel()
    report.finished_at = datetime.now(UTC)
    return report


def _one_line(err: BaseException) -> str:
    text = first_line(err)
    return text if isinstance(err, DsmoError) else f"{type(err).__name__}: {text}"
