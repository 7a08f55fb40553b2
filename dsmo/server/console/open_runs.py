"""A definition page's open runs: how many each published version has, and what moving them would do.

The counts come from visibility (the agent, the version, Temporal's `ExecutionStatus` Running).
For each older version with open runs, the first runs (at most `DRY_RUNS_PER_PAGE` on a page
load, all versions together) are dry-run to the latest version with `DsmoClient.migrate_run`:
each run is asked where it is and the move's checks run here, so nothing is sent to any run.
A run whose worker is down answers no query, so each dry run has `DRY_RUN_SECONDS` and all of
a page's together `DRY_RUNS_SECONDS`; a run not checked in time is listed as such.
The page moves nothing; moves stay an operator's act with a reason (`dsmo runs migrate`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from temporalio.service import RPCError

from dsmo.client.batches import selected_runs
from dsmo.client.client_errors import AlreadyOnTarget, MigrationNotAccepted
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.migration import selection
from dsmo.client.run_selection import Scope
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.migration_io import MigrationAck
from dsmo.workflows.definition.model import AgentDefinition

DRY_RUNS_PER_PAGE = 50  # runs dry-run on one page load: each costs a few reads of the run and the store
DRY_RUNS_AT_ONCE = 8
# A run whose worker is down answers no query (Temporal gives up after ~10 s): the page does not wait for it.
DRY_RUN_SECONDS = 2.0
DRY_RUNS_SECONDS = 5.0  # every dry run of a page load together; those not done by then are listed as unchecked


@dataclass(frozen=True)
class VersionCount:
    """A published version and how many of its runs are open.

    Attributes:
        workflow_version: The version's hash.
        label: Its author's ``version`` label.
        open_runs: Its runs that have not ended (pending, running or waiting).
    """

    workflow_version: str
    label: str
    open_runs: int


@dataclass(frozen=True)
class DryRun:
    """What moving one run to the latest version would do: the move, why not, or why it was not checked."""

    run_id: str
    move: MigrationAck | None = None
    refused: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class VersionPreview:
    """The dry runs of one older version's open runs: the first ``len(runs)`` (none once the page's cap is spent)."""

    version: VersionCount
    runs: list[DryRun]


@dataclass(frozen=True)
class OpenRuns:
    """The open-runs part of a definition page.

    Attributes:
        latest: The version runs would move to.
        counts: Every published version, newest first, with its open runs.
        previews: Older versions with open runs, each with its dry runs.
        problem: Why the counts could not be read (the rest of the page still shows).
    """

    latest: VersionCount | None
    counts: list[VersionCount] = field(default_factory=list)
    previews: list[VersionPreview] = field(default_factory=list)
    problem: str | None = None

    @property
    def cap(self) -> int:
        """How many runs one page load dry-runs at most."""
        return DRY_RUNS_PER_PAGE


async def open_runs(dsmo: DsmoClient, agent: str, versions: list[str]) -> OpenRuns:
    """Count ``agent``'s open runs per published version and dry-run the older ones to the latest.

    Args:
        dsmo: The console's client.
        agent: The agent.
        versions: Its published versions, oldest first (as `DsmoClient.versions` gives them).

    Returns:
        The counts and dry runs; ``problem`` names what could not be read instead of failing.
    """
    if not versions:
        return OpenRuns(latest=None)
    try:
        definitions = await asyncio.gather(*(dsmo.definition(agent, version) for version in reversed(versions)))
        totals = await asyncio.gather(*(dsmo.count_runs(_open(agent, v), runs=Scope.OPEN) for v in reversed(versions)))
    except (DsmoError, RPCError) as err:  # the definition page still shows, without its counts
        return OpenRuns(latest=None, problem=f"open runs: {str(err).splitlines()[0]}")
    if None in totals:
        return OpenRuns(latest=None, problem="open runs: Temporal cannot count them now")
    counts = [
        VersionCount(definition.workflow_version, definition.version, total)
        for definition, total in zip(definitions, totals, strict=True)
        if total is not None
    ]
    try:
        selected = await _selected(dsmo, agent, counts[1:])
    except (DsmoError, RPCError) as err:
        return OpenRuns(latest=counts[0], counts=counts, problem=f"open runs: {str(err).splitlines()[0]}")
    slots = asyncio.Semaphore(DRY_RUNS_AT_ONCE)
    checks = {
        run_id: asyncio.ensure_future(_dry_run(dsmo, slots, run_id, definitions[0]))
        for _, run_ids in selected
        for run_id in run_ids
    }
    try:
        if checks:
            await asyncio.wait(checks.values(), timeout=DRY_RUNS_SECONDS)
    finally:  # late ones, or all of them when the page's request is abandoned
        late = [check for check in checks.values() if not check.done()]
        for check in late:
            check.cancel()
        await asyncio.gather(*late, return_exceptions=True)
    previews = [
        VersionPreview(count, [_outcome(run_id, checks[run_id]) for run_id in run_ids]) for count, run_ids in selected
    ]
    return OpenRuns(latest=counts[0], counts=counts, previews=previews)


async def _selected(dsmo: DsmoClient, agent: str, older: list[VersionCount]) -> list[tuple[VersionCount, list[str]]]:
    """The runs to dry-run per older version with open runs, newest version first, within the page's cap."""
    budget, selected = DRY_RUNS_PER_PAGE, []
    for count in older:
        if count.open_runs == 0:
            continue
        rows = selected_runs(dsmo.core, _open(agent, count.workflow_version), runs=Scope.OPEN, limit=budget)
        run_ids = [run_id async for run_id in rows] if budget else []
        budget -= len(run_ids)
        selected.append((count, run_ids))
    return selected


def _open(agent: str, version: str) -> str:
    """The filter of the agent's runs on ``version`` (open ones are asked for with it)."""
    return selection(agent, version, None)


def _outcome(run_id: str, check: asyncio.Future[DryRun]) -> DryRun:
    if check.cancelled():
        return DryRun(run_id, note=f"not checked: the page's {DRY_RUNS_SECONDS:g} s for dry runs ran out")
    failure = check.exception()
    if failure is not None:  # one run the client could not read does not take the page down
        return DryRun(run_id, note=f"not checked: {type(failure).__name__}: {failure}")
    return check.result()


async def _dry_run(dsmo: DsmoClient, slots: asyncio.Semaphore, run_id: str, latest: AgentDefinition) -> DryRun:
    async with slots:
        try:
            async with asyncio.timeout(DRY_RUN_SECONDS):
                return DryRun(run_id, move=await dsmo.migrate_run(run_id, latest, dry_run=True))
        except TimeoutError:
            return DryRun(run_id, note=f"not checked: no answer in {DRY_RUN_SECONDS:g} s (is its worker running?)")
        except AlreadyOnTarget:
            return DryRun(run_id, note="already on the latest version")
        except MigrationNotAccepted as err:
            return DryRun(run_id, refused=str(err).removeprefix(f"run {run_id!r}: "))
        except DsmoError as err:  # ended since it was listed, no worker, a failing task: said, not fatal
            return DryRun(run_id, note=f"not checked: {err}")
